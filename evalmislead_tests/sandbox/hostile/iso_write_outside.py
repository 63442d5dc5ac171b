# Writes where the invoking user may write (beside the batch folder: the user's home in the
# unprivileged run, /tmp as root) and into the repository: every mount but the run's own is read-only.
import os

TARGETS = [__OUTSIDE__, __REPO_FILE__]


def test_cannot_write_outside_the_run():
    for path in TARGETS:
        try:
            with open(path, "w") as fh:
                fh.write("escaped")
        except OSError:
            continue
        assert False, path
