"""Kernel plumbing of the sandbox's warm interpreter (runs INSIDE bubblewrap; standard library only).

Framing (4-byte big-endian length + UTF-8 JSON; never pickle), the seccomp filter (a deny-list of syscalls, sockets
of AF_UNIX only; compiled once, installed per run with one syscall), namespaces, mounts, capabilities, fds, and
:class:`Settings` — everything prepared once in the zygote so a run's own set-up is a handful of syscalls.
"""

from __future__ import annotations

import ctypes
import json
import os
import struct

CLONE_NEWNS = 0x00020000
CLONE_NEWCGROUP = 0x02000000
CLONE_NEWUTS = 0x04000000
CLONE_NEWIPC = 0x08000000
CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
CLONE_NEWNET = 0x40000000
NAMESPACE_FLAGS = (CLONE_NEWUSER, CLONE_NEWNS, CLONE_NEWPID, CLONE_NEWNET, CLONE_NEWIPC, CLONE_NEWUTS, CLONE_NEWCGROUP)
MS_RDONLY, MS_NOSUID, MS_NODEV, MS_NOEXEC = 1, 2, 4, 8
PR_SET_PDEATHSIG, PR_SET_DUMPABLE, PR_SET_SECCOMP, PR_CAPBSET_DROP = 1, 4, 22, 24
PR_SET_NO_NEW_PRIVS, PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL = 38, 47, 4
MAX_MESSAGE = 256 << 20

libc = ctypes.CDLL(None, use_errno=True)


def check(rc: int, what: str) -> None:
    if rc != 0:
        err = ctypes.get_errno()
        raise OSError(err, f"{what}: {os.strerror(err)}")


# ---------------------------------------------------------------- framing
def frame(data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + data


def write_all(fd: int, buf: bytes) -> None:
    view = memoryview(buf)
    while view:
        view = view[os.write(fd, view) :]


def send_msg(fd: int, obj: object) -> None:
    write_all(fd, frame(json.dumps(obj, ensure_ascii=False).encode()))


def read_exact(fd: int, n: int) -> bytes:
    chunks, got = [], 0
    while got < n:
        chunk = os.read(fd, min(n - got, 1 << 20))
        if not chunk:
            raise EOFError("peer closed")
        chunks.append(chunk)
        got += len(chunk)
    return b"".join(chunks)


def recv_frame(fd: int) -> bytes:
    (n,) = struct.unpack(">I", read_exact(fd, 4))
    if n > MAX_MESSAGE:
        raise ValueError(f"message of {n} bytes exceeds {MAX_MESSAGE}")
    return read_exact(fd, n)


def recv_msg(fd: int) -> object:
    return json.loads(recv_frame(fd))


# ---------------------------------------------------------------- seccomp (libseccomp through ctypes)
class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


class _SockFprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_NE, SCMP_CMP_EQ, SCMP_CMP_MASKED_EQ = 1, 4, 7
EPERM, ENOSYS = 1, 38
AF_UNIX = 1
TIOCSTI, TIOCLINUX = 0x5412, 0x541C

# Syscalls model code never needs and that reach the kernel's riskier surface or let it leave its box.
DENIED = (
    "ptrace process_vm_readv process_vm_writev kcmp pidfd_getfd mount umount2 pivot_root chroot unshare setns "
    "setsid setpgid bpf perf_event_open userfaultfd keyctl add_key request_key kexec_load kexec_file_load "
    "init_module finit_module delete_module reboot swapon swapoff syslog acct settimeofday clock_settime "
    "clock_adjtime adjtimex name_to_handle_at open_by_handle_at iopl ioperm quotactl io_uring_setup io_uring_enter "
    "io_uring_register fanotify_init lookup_dcookie vhangup mount_setattr fsopen fsmount fsconfig fspick open_tree "
    "move_mount personality"
).split()
# Shared memory whose pages RLIMIT_AS does not count (the bound without a per-call memory cgroup).
SHARED_MEMORY = ("memfd_create", "memfd_secret", "shmget")


def compile_seccomp(denied: tuple[str, ...] = ()) -> bytes | None:
    """The deny-list filter (plus ``denied``) as raw BPF (None when libseccomp is not available); tens of ms."""
    try:
        lib = ctypes.CDLL("libseccomp.so.2")
    except OSError:
        return None
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p,
        ctypes.c_uint32,
        ctypes.c_int,
        ctypes.c_uint,
        ctypes.c_void_p,
    ]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        return None

    def rule(name: str, err: int, *cmps: tuple[int, int, int, int]) -> None:
        nr = lib.seccomp_syscall_resolve_name(name.encode())
        if nr < 0:  # not on this architecture
            return
        arr = (_ArgCmp * max(1, len(cmps)))(*[_ArgCmp(*c) for c in cmps])
        rc = lib.seccomp_rule_add_array(ctx, 0x00050000 | (err & 0xFFFF), nr, len(cmps), arr if cmps else None)
        if rc != 0:
            raise OSError(-rc, f"seccomp rule for {name}")

    r, w = os.pipe()
    try:
        for name in (*DENIED, *denied):
            rule(name, EPERM)
        for name in ("socket", "socketpair"):  # an allow-list: the net namespace does not confine e.g. AF_VSOCK
            rule(name, EPERM, (0, SCMP_CMP_NE, AF_UNIX, 0))
        for flag in NAMESPACE_FLAGS:
            rule("clone", EPERM, (0, SCMP_CMP_MASKED_EQ, flag, flag))
        rule("clone3", ENOSYS)  # its flags live in memory a filter cannot read; libc falls back to clone()
        for req in (TIOCSTI, TIOCLINUX):
            rule("ioctl", EPERM, (1, SCMP_CMP_EQ, req, 0))
        rc = lib.seccomp_export_bpf(ctx, w)
        if rc != 0:
            raise OSError(-rc, "seccomp_export_bpf")
        os.close(w)
        w = -1
        chunks = []
        while chunk := os.read(r, 1 << 16):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        lib.seccomp_release(ctx)
        os.close(r)
        if w >= 0:
            os.close(w)


class Seccomp:
    """A compiled filter, ready to load into a process (and all its descendants) with two prctl calls."""

    def __init__(self, bpf: bytes) -> None:
        self._buf = ctypes.create_string_buffer(bpf, len(bpf))
        self._prog = _SockFprog(len(bpf) // 8, ctypes.cast(self._buf, ctypes.c_void_p))
        self._ref = ctypes.byref(self._prog)

    def install(self) -> None:
        check(libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0), "PR_SET_NO_NEW_PRIVS")
        check(libc.prctl(PR_SET_SECCOMP, 2, self._ref, 0, 0), "PR_SET_SECCOMP")  # SECCOMP_MODE_FILTER


# ---------------------------------------------------------------- processes
def mount(source: str, target: str, fstype: str, flags: int, data: str) -> None:
    check(libc.mount(source.encode(), target.encode(), fstype.encode(), flags, data.encode()), f"mount {target}")


def write_file(path: str, text: str) -> None:
    with open(path, "w") as f:
        f.write(text)


def drop_bounding_set() -> None:
    """Empty the capability bounding and ambient sets (inherited by every run: no execve can gain a capability)."""
    for cap in range(64):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            break  # past the last capability this kernel knows
    libc.prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)


_CAP_HEADER = (ctypes.c_uint32 * 2)(0x20080522, 0)  # _LINUX_CAPABILITY_VERSION_3, this process
_CAP_NONE = (ctypes.c_uint32 * 6)()  # effective/permitted/inheritable x 2 words, all zero


def clear_capabilities() -> None:
    """Drop this process's effective, permitted and inheritable capabilities (ambient ones go with permitted)."""
    check(libc.capset(_CAP_HEADER, _CAP_NONE), "capset")


def keep_only_fds(keep: list[int]) -> None:
    """Close every fd above 2 except ``keep`` (close_range: no /proc walk)."""
    low = 3
    for fd in sorted(set(keep)):
        if fd >= low:
            os.closerange(low, fd)
            low = fd + 1
    os.closerange(low, 1 << 20)


class Settings:
    """The pool's limits and the kernel objects prepared once for every run."""

    def __init__(self, cfg: dict) -> None:
        self.socket_dir = cfg["socket_dir"]
        self.max_output = int(cfg["max_output_bytes"])
        self.scratch_mb = int(cfg["scratch_mb"])
        self.nproc = int(cfg["max_processes"])
        self.nofile = int(cfg["max_open_files"])
        self.fsize_mb = int(cfg["max_file_mb"])
        self.memory_bound = cfg["memory_bound"]
        bpf = compile_seccomp(SHARED_MEMORY) if cfg["seccomp"] else None
        if cfg["seccomp"] and not bpf:  # fail closed: the filter is part of what bounds memory and the network
            raise OSError("libseccomp (libseccomp.so.2) is not usable inside the sandbox; apt-get install libseccomp2")
        self.seccomp = Seccomp(bpf) if bpf else None
