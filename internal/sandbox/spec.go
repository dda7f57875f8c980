package sandbox

import (
	"errors"
	"time"
)

// ErrUnavailable means the confinement Run promises cannot be provided on this machine
// (or failed to be set up for this call); the command did not run.
var ErrUnavailable = errors.New("sandbox unavailable")

// ScriptFD is the descriptor on which a command finds Spec.Script.
const ScriptFD = 3

// Defaults used when a Spec leaves a limit at zero.
const (
	DefaultTimeout   = 60 * time.Second
	DefaultMaxOutput = 1 << 20

	// DefaultMaxProcesses bounds the processes and threads of one call (cgroup
	// pids.max, and RLIMIT_NPROC where that binds).
	DefaultMaxProcesses = 512
	// DefaultMaxMemory bounds memory: the whole call's in a cgroup (memory.max), else
	// each process's address space (RLIMIT_AS).
	DefaultMaxMemory = 4 << 30
	// DefaultMaxFileSize is RLIMIT_FSIZE: no file can be written past 1 GiB.
	DefaultMaxFileSize = 1 << 30
	// DefaultMaxOpenFiles is RLIMIT_NOFILE for every process of the call.
	DefaultMaxOpenFiles = 4096
)

// DefaultReadOnlyRoots are the system directories a confined command may read and
// execute from. Those also in FilteredRoots (/etc) are not granted whole: see
// FilteredRoots. /dev is not among them: only /dev/null, /dev/zero, /dev/full (read and
// write), /dev/random and /dev/urandom (read) are reachable, and /dev can be listed, so a
// command running as its owner cannot read a raw disk. Everything else outside the writable roots (home directories, /root,
// /tmp, toolgate's data directory, /var) is neither readable nor writable. Missing
// entries are skipped.
var DefaultReadOnlyRoots = []string{
	"/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
	"/nix/store", "/snap", "/run/systemd/resolve", "/proc", "/sys",
}

// FilteredRoots are read-only roots granted entry by entry rather than whole, so that
// secrets in them stay unreadable even when the sandbox's uid owns them (toolgate run
// as root). Under a filtered root, an entry is readable only when any user of the
// machine could read it anyway: a file must have the others-read bit, a directory the
// others-read and others-search bits; symbolic links are never followed (their
// target is readable only if it is itself allowed); and the names in
// SecretNames are refused whatever their mode. Names in the directories remain
// listable.
var FilteredRoots = []string{"/etc"}

// SecretNames are paths (relative to a filtered root, shell patterns per element)
// that are never readable, even when a misconfigured host makes them world-readable.
var SecretNames = []string{
	"shadow", "shadow-", "gshadow", "gshadow-", "sudoers", "sudoers.d",
	"security/opasswd", "ssh/ssh_host_*_key", "ssh/*_key", "ssl/private",
	"master.passwd", "krb5.keytab",
}

// Spec describes one confined command.
type Spec struct {
	// Argv is the command; Argv[0] is looked up in the PATH of Env when it has no slash.
	Argv []string
	// Dir is the working directory, absolute; it is writable.
	Dir string
	// Env is the child's whole environment (nothing is inherited). HOME and TMPDIR are
	// always replaced by the per-call scratch directory.
	Env []string
	// AllowInternet keeps the host's network namespace; otherwise the command gets a
	// fresh one with only a loopback interface.
	AllowInternet bool
	// Timeout bounds the call (DefaultTimeout when zero). On expiry the whole process
	// tree is killed.
	Timeout time.Duration
	// MaxOutput caps stdout plus stderr in bytes (DefaultMaxOutput when zero). On
	// overflow the tree is killed and Result.Truncated is set.
	MaxOutput int
	// WritableRoots are writable directories in addition to Dir and the scratch
	// directory.
	WritableRoots []string
	// ReadOnlyRoots replaces DefaultReadOnlyRoots when non-nil.
	ReadOnlyRoots []string
	// FilteredRoots replaces the package's FilteredRoots when non-nil.
	FilteredRoots []string
	// Script, when not nil, is readable on descriptor 3 of the command, from its start,
	// and nowhere else (a memory file; the helper makes it right before execve). The
	// command reads it from there and should close it, as shelltool's bash bootstrap
	// does. Text in Argv is in /proc/PID/cmdline, which every user of the host can
	// read; text passed here is not.
	Script []byte
	// ReadOnlyPaths are existing files or directories inside a writable root that must
	// stay read-only (for example <workspace>/.git; shelltool passes the protected paths
	// internal/protect finds, and checks afterwards for ones the command created). Each is bind-mounted
	// read-only and every ancestor between it and its writable root is pinned (made a
	// mount point) so it cannot be renamed or replaced. Missing paths are skipped; a path
	// that is a symbolic link refuses the call.
	ReadOnlyPaths []string

	// Resource limits; zero means the package default. MaxProcesses counts processes
	// and threads; MaxMemory is bytes for the whole call under a cgroup, else per
	// process address space; MaxFileSize is the largest file a process may write;
	// MaxOpenFiles is per process. CPU time per process is limited to the timeout.
	// MaxProcesses below 16 is raised to 16 (the setup helper's own threads count).
	MaxProcesses int
	MaxMemory    int64
	MaxFileSize  int64
	MaxOpenFiles int
}

// Result is what a confined command did.
type Result struct {
	Stdout, Stderr []byte
	// ExitCode is the command's exit status, or -1 when it was killed by a signal.
	ExitCode int
	// Signal names the signal that ended it, if any.
	Signal string
	// TimedOut is set when Timeout expired and the tree was killed.
	TimedOut bool
	// Truncated is set when output exceeded MaxOutput and the tree was killed.
	Truncated bool
	// LimitExceeded names the resource limit toolgate saw reached: "processes" (the
	// cgroup's pids.max was hit; the tree was then killed) or "memory" (the cgroup's
	// OOM killer ran). Empty when no cgroup is in use or no limit was hit; limits
	// enforced by rlimits show up as the command's own errors or signals (SIGXCPU,
	// SIGXFSZ).
	LimitExceeded string
	Duration      time.Duration
}

// helperArg0 is the argv[0] that turns a re-executed binary into the setup helper.
const helperArg0 = "toolgate-sandbox-helper"

// Exit code the helper uses when setup fails; the status pipe says why.
const helperSetupFailed = 125

// execFailedPrefix marks a status message about the command itself (not found, not
// executable) rather than about confinement.
const execFailedPrefix = "exec: "

// bind is one bind mount the helper makes, in order.
type bind struct {
	Path     string `json:"path"`
	ReadOnly bool   `json:"ro"`
}

// helperConfig travels to the helper over an inherited pipe (fd 3), never through argv
// or the environment.
type helperConfig struct {
	Mode      string   `json:"mode"` // "exec" or "probe"
	Argv      []string `json:"argv"`
	Env       []string `json:"env"`
	Dir       string   `json:"dir"`
	NewNet    bool     `json:"new_net"`
	MountProc bool     `json:"mount_proc"`
	Landlock  bool     `json:"landlock"`
	ReadOnly  []string `json:"read_only"`
	Writable  []string `json:"writable"`
	Binds     []bind   `json:"binds"`
	DropCaps  bool     `json:"drop_caps"`
	Seccomp   bool     `json:"seccomp"`
	// ReadDirOnly are directories granted only listing (the filtered roots and their
	// split directories).
	ReadDirOnly []string `json:"read_dir_only"`
	// Rlimits are set right before execve (after setup, so the helper's own runtime is
	// never starved by them).
	Rlimits []rlimit `json:"rlimits"`
	// Attach are the id-mapped mounts toolgate prepared (inherited descriptors), moved
	// into place before any other mount change.
	Attach []attachMount `json:"attach"`
	// ReadOnlyMounts makes every mount read-only except the writable roots.
	ReadOnlyMounts bool `json:"read_only_mounts"`
	// Script is made readable on descriptor 3 of the command (see Spec.Script).
	Script []byte `json:"script,omitempty"`
}

// rlimit is one setrlimit call the helper makes.
type rlimit struct {
	Resource int    `json:"resource"`
	Cur      uint64 `json:"cur"`
	Max      uint64 `json:"max"`
}

// Capabilities is what confinement this machine provides, as measured by actually
// starting a confined helper (not by reading sysctls).
type Capabilities struct {
	UserNS  bool `json:"user_namespace"`
	PIDNS   bool `json:"pid_namespace"`
	MountNS bool `json:"mount_namespace"`
	NetNS   bool `json:"network_namespace"`
	// LandlockABI is the kernel's Landlock ABI version, 0 when absent.
	LandlockABI int `json:"landlock_abi"`
	// Cgroup says which cgroup, if any, each call runs in, and why none otherwise.
	Cgroup string `json:"cgroup"`
	// ProcessLimit and MemoryLimit say what bounds a call's process count and memory
	// on this machine (a cgroup, an rlimit, or nothing, with the reason).
	ProcessLimit string `json:"process_limit"`
	MemoryLimit  string `json:"memory_limit"`
	// Rlimits are the per-process limits every call gets.
	Rlimits string `json:"rlimits"`
	// Available is true when Run can provide every layer it promises.
	Available bool `json:"available"`
	// Reason says why not, when Available is false.
	Reason string `json:"reason,omitempty"`

	// Seccomp describes the system-call filter every call gets, or why there is none.
	Seccomp string `json:"seccomp"`

	// ReadOnlyMounts is set when every mount but the writable roots is read-only in the
	// sandbox (so chmod, chown, utimes and xattr calls outside them fail); required.
	ReadOnlyMounts bool `json:"read_only_mounts"`
	// Identity says which host uid and gid commands run as.
	Identity string `json:"identity"`

	// cgroupOK is set when a confined helper was started in a cgroup leaf; seccompOK
	// when one was started with the system-call filter.
	cgroupOK, seccompOK bool
}
