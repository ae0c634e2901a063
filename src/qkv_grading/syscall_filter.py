"""The system calls a sandbox may not make: a seccomp filter, compiled with libseccomp, that bwrap loads.

:func:`compiled` returns the filter as the raw BPF program that ``bwrap --seccomp FD``
loads into the sandbox just before it starts the runner; every process of the sandbox
inherits it and none can remove it. Everything is allowed except, with ``EPERM``:

- a **user namespace** (``unshare`` or ``clone`` with ``CLONE_NEWUSER``, and ``setns``): in one
  of its own a notebook would be root, could mount a tmpfs past every size limit, and
  rearrange what it sees. ``clone3`` passes its flags in memory, where a filter cannot read
  them, so it fails with ``ENOSYS`` and the C library falls back to ``clone``;
- **kernel keys** (``add_key``, ``keyctl``, ``request_key``): a keyring is kept by the kernel
  per user, outside every namespace, and would outlive the sandbox into the next one;
- **io_uring**, ``userfaultfd``, ``perf_event_open`` and ``bpf``: kernel interfaces no notebook
  needs, with a long record of ways out of a sandbox.

A system call of another architecture (a 32-bit call from a 64-bit process) kills the process,
libseccomp's default. Uses libseccomp (Debian's ``libseccomp2``) through ctypes; raises
:class:`FilterUnavailable` when it is missing.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import functools
import os

CLONE_NEWUSER = 0x10000000
DENIED = ("setns", "add_key", "keyctl", "request_key", "io_uring_setup", "io_uring_enter", "io_uring_register",
          "userfaultfd", "perf_event_open", "bpf")
NOT_THERE = ("clone3",)  # fails with ENOSYS, so that the C library uses clone, which the filter can read

_ALLOW = 0x7FFF0000
_MASKED_EQ = 7


def _errno(number: int) -> int:
    return 0x00050000 | (number & 0xFFFF)


class _Comparison(ctypes.Structure):
    _fields_ = [("arg", ctypes.c_uint), ("op", ctypes.c_int), ("datum_a", ctypes.c_uint64),
                ("datum_b", ctypes.c_uint64)]


class FilterUnavailable(RuntimeError):
    """libseccomp cannot be loaded or refused the filter: the message says what to install."""


def _library():
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    try:
        lib = ctypes.CDLL(name, use_errno=True)
    except OSError:
        raise FilterUnavailable("grading needs libseccomp to keep sandboxes from making user namespaces and "
                                "kernel keys: sudo apt-get install libseccomp2") from None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint,
                                           ctypes.POINTER(_Comparison)]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    return lib


@functools.cache
def compiled() -> bytes:
    """The filter as a BPF program (``struct sock_filter`` entries), ready for ``bwrap --seccomp``."""
    lib = _library()
    context = lib.seccomp_init(_ALLOW)
    if not context:
        raise FilterUnavailable("libseccomp could not start a filter")
    try:
        def deny(name: str, number: int, *comparisons: _Comparison) -> None:
            call = lib.seccomp_syscall_resolve_name(name.encode())
            if call < 0:
                return  # not a system call of this architecture
            array = (_Comparison * max(1, len(comparisons)))(*comparisons)
            code = lib.seccomp_rule_add_array(context, _errno(number), call, len(comparisons), array)
            if code != 0:
                raise FilterUnavailable(f"libseccomp refused the rule for {name}: {os.strerror(-code)}")

        new_user = _Comparison(0, _MASKED_EQ, CLONE_NEWUSER, CLONE_NEWUSER)  # flags & CLONE_NEWUSER
        deny("unshare", errno.EPERM, new_user)
        deny("clone", errno.EPERM, new_user)  # the flags are clone's first argument on x86-64 and arm64
        for name in DENIED:
            deny(name, errno.EPERM)
        for name in NOT_THERE:
            deny(name, errno.ENOSYS)
        fd = os.memfd_create("qkv-seccomp", os.MFD_CLOEXEC)
        try:
            code = lib.seccomp_export_bpf(context, fd)
            if code != 0:
                raise FilterUnavailable(f"libseccomp could not write the filter: {os.strerror(-code)}")
            size = os.lseek(fd, 0, os.SEEK_END)
            return os.pread(fd, size, 0)
        finally:
            os.close(fd)
    finally:
        lib.seccomp_release(context)
