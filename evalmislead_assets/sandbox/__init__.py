"""Untrusted pytest tests in hardened processes: host, zygote, child, IPC, isolation, tamper checks, coverage probe.

Every module here imports only the standard library at module level: the zygote (zygote.py, started as a
script) imports them."""
