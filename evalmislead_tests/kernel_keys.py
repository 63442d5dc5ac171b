"""The host side of the keyring corpus files (hostile/kernel_keyring_*.py): plant a key in this process's session
and user keyrings, look for keys a test left there, remove both. Raw syscalls through ctypes (the standard
library has no keyctl); x86_64 numbers, as the sandbox's filter is built for the native architecture."""

from __future__ import annotations

import ctypes
import secrets

SYS_ADD_KEY, SYS_KEYCTL = 248, 250
KEYCTL_UNLINK, KEYCTL_SEARCH, KEYCTL_INVALIDATE = 9, 10, 21
SESSION, USER, USER_SESSION = -3, -4, -5
LEFT = "evalmislead-left"  # the description kernel_keyring_left.py adds
_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _call(*args: int | bytes | None) -> int:
    rc = _libc.syscall(*[ctypes.c_long(a) if isinstance(a, int) else a for a in args])
    return rc if rc >= 0 else -ctypes.get_errno()


def search(description: str, rings: tuple[int, ...] = (SESSION, USER, USER_SESSION)) -> list[int]:
    """The serials of "user" keys with this description reachable from this process's keyrings."""
    found = [_call(SYS_KEYCTL, KEYCTL_SEARCH, ring, b"user", description.encode(), 0) for ring in rings]
    return sorted({k for k in found if k > 0})


def plant() -> tuple[str, list[int]]:
    """A key with a fresh description and payload in the session and the user keyring: (description, serials);
    no serials where this host gives this process no keyrings (then there is nothing a test could read)."""
    description = f"evalmislead-host-{secrets.token_hex(6)}"
    payload = secrets.token_hex(8).encode()
    serials = [_call(SYS_ADD_KEY, b"user", description.encode(), payload, len(payload), ring) for ring in (SESSION, USER)]
    return description, [s for s in serials if s > 0]


def remove(serials: list[int]) -> None:
    for serial in serials:
        _call(SYS_KEYCTL, KEYCTL_INVALIDATE, serial)
        for ring in (SESSION, USER, USER_SESSION):
            _call(SYS_KEYCTL, KEYCTL_UNLINK, serial, ring)
