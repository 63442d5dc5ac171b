"""A small ctypes binding to libseccomp's documented C API (seccomp_init(3), seccomp_rule_add(3), seccomp_export_bpf(3)).

Why not a package: libseccomp's own Python bindings are not on PyPI (distributions ship them for the
system interpreter only, not for a virtual environment), the one pure-Python binding there (pyseccomp
0.1.2) has had no release since January 2021, and the sandbox's modules import only the standard library
(the zygote imports them before anything else). The C library is the maintained part: it resolves
syscall names per architecture, rejects other ABIs (i386 through ``int 0x80``, x32) and compiles the
rules to BPF. This module only calls it, and loads the compiled program with the ``prctl`` that
``seccomp_load(3)`` makes.

Every function pointer is bound when ``Library`` is made (in the zygote, before any test code exists),
so a later change to ``ctypes`` or to this module cannot change what a test process loads.

Standard library only: the zygote imports it.
"""

from __future__ import annotations

import ctypes
import os
import struct
import tempfile
from dataclasses import dataclass

SONAME = "libseccomp.so.2"
ACT_ALLOW = 0x7FFF0000
ACT_ERRNO_BASE = 0x00050000
# enum scmp_compare
CMP_NE, CMP_EQ, CMP_MASKED_EQ = 1, 4, 7


def act_errno(err: int) -> int:
    return ACT_ERRNO_BASE | (err & 0xFFFF)


class _ArgCmp(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


@dataclass(frozen=True)
class Cmp:
    """One comparison on a syscall argument: ``arg`` (0-5) ``op`` ``a`` (for CMP_MASKED_EQ: arg & a == b)."""

    arg: int
    op: int
    a: int
    b: int = 0


@dataclass(frozen=True)
class Rule:
    """``action`` for ``syscall`` when every comparison holds (rules for one syscall are alternatives)."""

    syscall: str
    action: int
    cmps: tuple[Cmp, ...] = ()


class Unavailable(RuntimeError):
    """libseccomp cannot be loaded or refused the filter (one line, naming the fix)."""


MISSING = (f"the test sandbox needs {SONAME} (libseccomp 2.5 or later) to filter the tests' system calls and "
           "could not load it: install it (Debian/Ubuntu: apt-get install libseccomp2) and re-run; nothing was run")


_checked: list[str | None] = []


def unavailable() -> str | None:
    """None when libseccomp loads here (checked once per process); else the one-line refusal naming the fix."""
    if not _checked:
        try:
            Library()
            _checked.append(None)
        except Unavailable as exc:
            _checked.append(str(exc))
    return _checked[0]


class Library:
    """libseccomp's functions, bound once."""

    def __init__(self) -> None:
        try:
            lib = ctypes.CDLL(SONAME, use_errno=True)
        except OSError:
            raise Unavailable(MISSING) from None
        self._init = lib.seccomp_init
        self._init.restype, self._init.argtypes = ctypes.c_void_p, [ctypes.c_uint32]
        self._resolve = lib.seccomp_syscall_resolve_name
        self._resolve.restype, self._resolve.argtypes = ctypes.c_int, [ctypes.c_char_p]
        self._add = lib.seccomp_rule_add_array
        self._add.restype = ctypes.c_int
        self._add.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)]
        self._release = lib.seccomp_release
        self._release.restype, self._release.argtypes = None, [ctypes.c_void_p]
        self._export_pfc = lib.seccomp_export_pfc
        self._export_pfc.restype, self._export_pfc.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]
        self._export_bpf = lib.seccomp_export_bpf
        self._export_bpf.restype, self._export_bpf.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_int]
        self._version = lib.seccomp_version
        self._version.restype = ctypes.POINTER(ctypes.c_uint * 3)

    def version(self) -> tuple[int, int, int]:
        v = self._version().contents
        return (v[0], v[1], v[2])

    def build(self, rules: tuple[Rule, ...], default: int = ACT_ALLOW) -> "Filter":
        """A filter context with ``rules`` (not loaded): load it in the process to be filtered (after a fork
        too: the context is plain memory)."""
        ctx = self._init(default)
        if not ctx:
            raise Unavailable("libseccomp could not make a filter (seccomp_init failed); nothing was run")
        try:
            for rule in rules:
                nr = self._resolve(rule.syscall.encode())
                if nr < 0:  # __NR_SCMP_ERROR: unknown to this libseccomp (an old version)
                    raise Unavailable(f"libseccomp {'.'.join(map(str, self.version()))} does not know the system "
                                      f"call {rule.syscall}: install libseccomp 2.5 or later; nothing was run")
                arr = (_ArgCmp * max(1, len(rule.cmps)))(*[_ArgCmp(c.arg, c.op, c.a, c.b) for c in rule.cmps])
                rc = self._add(ctx, rule.action, nr, len(rule.cmps), arr)
                if rc < 0:
                    raise Unavailable(f"libseccomp refused the rule for {rule.syscall} ({os.strerror(-rc)}); "
                                      "install libseccomp 2.5 or later; nothing was run")
        except BaseException:
            self._release(ctx)
            raise
        return Filter(ctx, self._export_pfc, self._export_bpf)


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


PR_SET_NO_NEW_PRIVS, PR_SET_SECCOMP, SECCOMP_MODE_FILTER = 38, 22, 2


class Filter:
    """A built filter; ``load()`` applies it to the calling process and every process it starts from then on.

    The BPF program is compiled by libseccomp once, when the filter is built (seccomp_export_bpf), so a
    load is the one ``prctl`` that ``seccomp_load(3)`` itself makes, not a compilation per process.
    """

    def __init__(self, ctx: int, export_pfc: object, export_bpf: object) -> None:
        self._ctx, self._pfc, self._bpf = ctx, export_pfc, export_bpf
        program = self._export(self._bpf)
        self._buffer = ctypes.create_string_buffer(program, len(program))
        self._fprog = _SockFprog(len(program) // 8, ctypes.addressof(self._buffer))
        libc = ctypes.CDLL(None, use_errno=True)
        self._prctl = libc.prctl
        self._prctl.restype = ctypes.c_int
        self._prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_void_p, ctypes.c_ulong, ctypes.c_ulong]
        self._get_errno = ctypes.get_errno

    def load(self) -> None:
        for option, arg in ((PR_SET_NO_NEW_PRIVS, 1), (PR_SET_SECCOMP, SECCOMP_MODE_FILTER)):
            pointer = ctypes.addressof(self._fprog) if option == PR_SET_SECCOMP else None
            if self._prctl(option, arg, pointer, 0, 0) != 0:
                err = self._get_errno()
                raise Unavailable(f"the kernel refused the sandbox's system-call filter ({os.strerror(err)}); "
                                  "run on Linux with seccomp filters enabled (CONFIG_SECCOMP_FILTER); nothing was run")

    def pfc(self) -> str:
        """The filter as libseccomp's pseudo-filter code (human-readable), for tests and docs."""
        return self._export(self._pfc).decode()

    def bpf(self) -> list[tuple[int, int, int, int]]:
        """The BPF program the kernel gets: (code, jt, jf, k) per instruction."""
        data = self._export(self._bpf)
        return [struct.unpack("HBBI", data[i:i + 8]) for i in range(0, len(data), 8)]

    def _export(self, export: object) -> bytes:
        with tempfile.TemporaryFile() as fh:
            rc = export(self._ctx, fh.fileno())  # type: ignore[operator]
            if rc < 0:
                raise Unavailable(f"libseccomp could not export the filter ({os.strerror(-rc)})")
            fh.seek(0)
            return fh.read()
