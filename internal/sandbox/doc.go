// Package sandbox runs one command confined, for the bash tool and declarative tools.
//
// Confinement comes from the kernel, not from inspecting the command: the child runs in
// fresh user, PID, mount, IPC and UTS namespaces (and a fresh network namespace unless
// the caller allows the internet), with a private /proc, no_new_privs, every capability
// dropped, and a Landlock domain that lets it write only the workspace and a per-call
// scratch directory and read only the system directories. Every mount but those
// writable roots is read-only in its mount namespace, since Landlock does not govern
// chmod, chown, utimes or xattrs; and when toolgate is the host's root the command runs
// as an unprivileged uid (SandboxUID), with the writable roots id-mapped so that root's
// files there stay its own. Because it is the init of its PID namespace, killing it on
// timeout kills every process it started, including those that escaped with setsid.
// Paths the caller names inside the workspace (shelltool passes the protected paths of
// internal/protect: .git, harness and editor configuration) are bind-mounted read-only,
// and their ancestors pinned so they cannot be renamed away. /etc is granted entry by
// entry (only what any user could read, never
// shadow, sudoers or SSH host keys), so secrets stay unreadable even when toolgate runs
// as root. A seccomp deny-list closes kernel attack surface (io_uring, keyrings, bpf,
// nested user namespaces, mounts, set-uid modes). The command is never in an argv:
// Spec.Script reaches it on a descriptor. Resource limits bound what a call can consume:
// rlimits set just before exec (CPU tied to the timeout, file size, open files, core
// dumps, processes, address space) and, where a cgroup can be had, a leaf per call
// whose pids.max (and, on cgroup v2, memory.max) the kernel enforces; reaching the
// process limit stops the call.
//
// Landlock, no_new_privs and capability changes apply to the calling thread and its
// descendants, so they cannot be applied in toolgate's own (multi-threaded, long-lived)
// process. Run therefore re-executes the current binary (/proc/self/exe) with argv[0] set
// to a marker; this package's init function recognises the marker, performs the setup on
// one locked thread, and execs the command. Any binary that imports this package,
// toolgate itself or a test binary, is therefore its own helper; nothing else needs
// wiring.
//
// Where the machine cannot provide this confinement, Run refuses with ErrUnavailable and
// never runs the command unconfined.
package sandbox
