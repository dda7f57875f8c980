//go:build linux

package sandbox

import (
	"errors"
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// deniedSyscalls fail with EPERM inside the sandbox. The filter is a deny-list, not an
// allow-list (arbitrary bash workloads need the rest); each entry is kernel attack
// surface a shell command has no business reaching, and which the other layers do not
// already close for an unprivileged process:
//
//   - io_uring_*: a second system-call interface with a long record of privilege
//     escalations;
//   - keyctl, add_key, request_key: the kernel keyring;
//   - bpf, perf_event_open, userfaultfd: frequently exploited, and of no use to a
//     command's ordinary work;
//   - setns: joining another namespace (none is reachable, but nothing needs it);
//   - kexec_*, *_module: capability-gated anyway; listed so the filter is not the
//     weaker layer;
//   - mount and the new mount API (open_tree, move_mount, fsopen, fsconfig, fsmount,
//     fspick, mount_setattr), umount2, pivot_root: Landlock already forbids changing
//     the mount topology; listed again so the read-only binds do not rest on one layer.
//
// Besides these, clone and unshare are refused when they ask for CLONE_NEWUSER (a
// nested user namespace hands the command a full capability set over fresh namespaces,
// which is how most unprivileged kernel exploits reach netfilter and friends), and
// clone3, whose flags the filter cannot read (they are behind a pointer), fails with
// ENOSYS so libc falls back to clone. System calls of another ABI (x32, or i386 on
// amd64) fail with ENOSYS: their numbers differ, so they would bypass the list.
//
// unixSocketNote: socket(AF_UNIX, …) is refused too (socketpair stays allowed). Below
// Landlock ABI 9 nothing governs connect() on a named UNIX socket, and path lookup is
// not a Landlock right, so a command could connect to any socket whose path it knows
// (docker.sock, an ssh-agent or gpg-agent socket, the D-Bus system bus), even in a
// directory it cannot list: a way out of every other layer.
var deniedSyscalls = []uintptr{
	unix.SYS_IO_URING_SETUP, unix.SYS_IO_URING_ENTER, unix.SYS_IO_URING_REGISTER,
	unix.SYS_KEYCTL, unix.SYS_ADD_KEY, unix.SYS_REQUEST_KEY,
	unix.SYS_BPF, unix.SYS_PERF_EVENT_OPEN, unix.SYS_USERFAULTFD,
	unix.SYS_SETNS,
	unix.SYS_KEXEC_LOAD, unix.SYS_KEXEC_FILE_LOAD,
	unix.SYS_INIT_MODULE, unix.SYS_FINIT_MODULE, unix.SYS_DELETE_MODULE,
	unix.SYS_MOUNT, unix.SYS_UMOUNT2, unix.SYS_PIVOT_ROOT,
	unix.SYS_OPEN_TREE, unix.SYS_MOVE_MOUNT, unix.SYS_FSOPEN, unix.SYS_FSCONFIG,
	unix.SYS_FSMOUNT, unix.SYS_FSPICK, unix.SYS_MOUNT_SETATTR,
}

// modeCall is a system call whose mode argument could carry the set-uid or set-gid
// bit: arg is the mode's index, flags (>= 0) the index of open flags, which must ask
// for a file to be created for the mode to mean anything.
type modeCall struct {
	nr         uintptr
	arg, flags int
}

// setIDCalls refuse (EPERM) a mode with S_ISUID or S_ISGID. Without this a command
// could plant a set-uid file in the workspace (cp /bin/sh x; chmod 4755 x), owned on
// the host by the workspace's owner — root when toolgate runs as root — for any local
// user to run later; the workspace's nosuid mount acts only inside the sandbox.
// openat2, whose mode sits behind a pointer the filter cannot read, is ENOSYS (callers
// fall back to openat). Set-gid directories go too (chmod g+s on a directory fails).
var setIDCalls = append([]modeCall{
	{unix.SYS_FCHMOD, 1, -1}, {unix.SYS_FCHMODAT, 2, -1}, {unix.SYS_FCHMODAT2, 2, -1},
	{unix.SYS_OPENAT, 3, 2}, {unix.SYS_MKNODAT, 2, -1},
}, legacyModeCalls...)

// seccompText describes the filter for Capabilities.
const seccompText = "deny-list filter: io_uring, keyrings, bpf, perf_event_open, userfaultfd, setns, mount API, modules and kexec refused (EPERM); clone/unshare with CLONE_NEWUSER refused; UNIX-domain sockets refused (socketpair allowed); set-uid and set-gid modes refused (EPERM) in chmod, fchmod*, and open/creat/mknod* that create; openat2, clone3 and foreign-ABI system calls ENOSYS"

// seccompArch is the audit architecture of this build, 0 where no filter is built.
func seccompArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

// Offsets in struct seccomp_data: int nr; u32 arch; u64 ip; u64 args[6]. args[0]'s
// low 32 bits are at 16 on the little-endian architectures built for.
const (
	seccompNR     = 0
	seccompArchO  = 4
	seccompArg0   = 16
	x32SyscallBit = 0x40000000
)

// seccompFilter builds the classic BPF program described at deniedSyscalls.
func seccompFilter(arch uint32) []unix.SockFilter {
	stmt := func(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
	jump := func(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
		return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
	}
	ret := func(v uint32) unix.SockFilter { return stmt(unix.BPF_RET|unix.BPF_K, v) }
	eperm := ret(unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM))
	enosys := ret(unix.SECCOMP_RET_ERRNO | uint32(unix.ENOSYS))
	allow := ret(unix.SECCOMP_RET_ALLOW)

	p := []unix.SockFilter{
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompArchO),
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, arch, 1, 0),
		enosys,
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompNR),
	}
	if arch == unix.AUDIT_ARCH_X86_64 {
		p = append(p, jump(unix.BPF_JMP|unix.BPF_JGE|unix.BPF_K, x32SyscallBit, 0, 1), enosys)
	}
	for _, nr := range deniedSyscalls {
		p = append(p, jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(nr), 0, 1), eperm)
	}
	// Set-id modes (see setIDCalls); each branch loads arguments, so it ends in its
	// own returns, and a call it does not match jumps past it with the number still
	// in the accumulator.
	argLow := func(i int) uint32 { return seccompArg0 + 8*uint32(i) }
	for _, c := range setIDCalls {
		var body []unix.SockFilter
		if c.flags >= 0 {
			body = append(body,
				stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, argLow(c.flags)),
				jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, unix.O_CREAT|unix.O_TMPFILE&^unix.O_DIRECTORY, 0, 3))
		}
		body = append(body,
			stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, argLow(c.arg)),
			jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, unix.S_ISUID|unix.S_ISGID, 0, 1),
			eperm,
			allow)
		p = append(p, jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(c.nr), 0, uint8(len(body))))
		p = append(p, body...)
	}
	p = append(p, jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(unix.SYS_OPENAT2), 0, 1), enosys)
	// socket(AF_UNIX, …): refused (see unixSocketNote); the accumulator then holds
	// args[0], so this branch ends in its own return.
	p = append(p,
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(unix.SYS_SOCKET), 0, 4),
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompArg0),
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, unix.AF_UNIX, 0, 1),
		eperm,
		allow,
	)
	p = append(p,
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(unix.SYS_CLONE3), 0, 1), enosys,
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(unix.SYS_CLONE), 1, 0),
		jump(unix.BPF_JMP|unix.BPF_JEQ|unix.BPF_K, uint32(unix.SYS_UNSHARE), 0, 3),
		stmt(unix.BPF_LD|unix.BPF_W|unix.BPF_ABS, seccompArg0),
		jump(unix.BPF_JMP|unix.BPF_JSET|unix.BPF_K, unix.CLONE_NEWUSER, 0, 1),
		eperm,
		allow,
	)
	return p
}

// installSeccomp applies the filter to the calling thread (and what it execs). It
// needs no_new_privs, which confine sets first.
func installSeccomp() error {
	arch := seccompArch()
	if arch == 0 {
		return fmt.Errorf("no system-call filter is built for %s", runtime.GOARCH)
	}
	prog := seccompFilter(arch)
	fprog := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	_, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER, 0, uintptr(unsafe.Pointer(&fprog)))
	runtime.KeepAlive(prog)
	if errno != 0 {
		if errors.Is(errno, unix.ENOSYS) || errors.Is(errno, unix.EINVAL) {
			return fmt.Errorf("seccomp filters are not available in this kernel: %w", errno)
		}
		return fmt.Errorf("installing the system-call filter: %w", errno)
	}
	return nil
}
