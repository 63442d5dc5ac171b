# The run's writable space is size-limited (beyond the per-file cap); /dev/shm and /tmp are read-only.
import errno
import os


def test_cannot_fill_the_disk():
    written = 0
    try:
        for i in range(64):  # 64 files x 8 MiB = 512 MiB, each under the 16 MiB per-file cap
            with open(f"big{i}.bin", "wb") as fh:
                for _ in range(8):
                    fh.write(b"\0" * (1 << 20))
                    written += 1 << 20
    except OSError as exc:
        assert exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG), exc
        assert written < 128 << 20
        return
    assert False, f"wrote {written >> 20} MiB"


def test_dev_shm_and_tmp_are_read_only():
    for path in ("/dev/shm/evalmislead-hostile", "/tmp/evalmislead-hostile"):
        try:
            with open(path, "w") as fh:
                fh.write("x")
        except OSError:
            continue
        assert False, path
