//go:build linux

package sandbox

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// init turns this process into the setup helper when it was re-executed by Run. It must
// run before anything else starts goroutines that matter: the whole setup happens on the
// main thread, which init already holds, and ends in execve from that same thread, so
// the per-thread state (Landlock domain, no_new_privs, capabilities) is what the command
// inherits.
func init() {
	if len(os.Args) == 0 || os.Args[0] != helperArg0 {
		return
	}
	runtime.LockOSThread()
	os.Exit(helperMain())
}

// helperMain reads its config from fd 3, confines itself and execs the command. Setup
// failures are written to fd 4 (close-on-exec, so a successful exec closes it empty).
func helperMain() int {
	status := os.NewFile(4, "status")
	if status == nil {
		return helperSetupFailed
	}
	unix.CloseOnExec(4)
	fail := func(err error) int {
		fmt.Fprintf(status, "%v", err)
		return helperSetupFailed
	}
	cfgFile := os.NewFile(3, "config")
	if cfgFile == nil {
		return fail(errors.New("no config pipe"))
	}
	data, err := io.ReadAll(io.LimitReader(cfgFile, 64<<20))
	cfgFile.Close()
	if err != nil {
		return fail(fmt.Errorf("reading config: %w", err))
	}
	var cfg helperConfig
	if err := json.Unmarshal(data, &cfg); err != nil {
		return fail(fmt.Errorf("decoding config: %w", err))
	}
	if err := confine(&cfg); err != nil {
		return fail(err)
	}
	if cfg.Mode == "probe" {
		return 0
	}
	if len(cfg.Argv) == 0 {
		return fail(errors.New("empty argv"))
	}
	path, err := lookPath(cfg.Argv[0], cfg.Env)
	if err != nil {
		return fail(fmt.Errorf("%s%w", execFailedPrefix, err))
	}
	if err := applyRlimits(cfg.Rlimits); err != nil {
		return fail(err)
	}
	if err := closeInheritedFDs(); err != nil {
		return fail(err)
	}
	if cfg.Script != nil {
		if err := scriptOnFD(cfg.Script); err != nil {
			return fail(err)
		}
	}
	err = unix.Exec(path, cfg.Argv, cfg.Env)
	return fail(fmt.Errorf("%sexecuting %s: %w", execFailedPrefix, cfg.Argv[0], err))
}

// confine applies every layer the config asks for, in the only order that works: mounts
// need capabilities and must precede Landlock (which forbids mount changes); among the
// mounts, the id-mapped ones come first (the paths below them must resolve through
// them), then /proc and /sys, then the read-only pass, then the protected paths' binds
// (made on the writable roots, so pins stay writable and read-only binds stay
// read-only); Landlock and seccomp need no_new_privs, capabilities are dropped after
// Landlock, and the system-call filter (which refuses mount) comes last.
func confine(cfg *helperConfig) error {
	if cfg.MountProc || len(cfg.Binds) > 0 || len(cfg.Attach) > 0 || cfg.ReadOnlyMounts {
		// Keep every mount change private to this namespace.
		if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
			return fmt.Errorf("making mounts private: %w", err)
		}
	}
	if err := attachMounts(cfg.Attach); err != nil {
		return err
	}
	if cfg.MountProc {
		// A /proc for this PID namespace only: other processes' environ and cmdline
		// (toolgate's, upstream servers') are not visible.
		if err := unix.Mount("proc", "/proc", "proc", unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting a private /proc: %w", err)
		}
	}
	if cfg.NewNet && cfg.MountProc {
		// sysfs shows the network namespace of whoever mounts it; remount it so the
		// host's interfaces are not listed. Read-only: nothing in it is the command's.
		if err := unix.Mount("sysfs", "/sys", "sysfs", unix.MS_RDONLY|unix.MS_NOSUID|unix.MS_NODEV|unix.MS_NOEXEC, ""); err != nil {
			return fmt.Errorf("mounting a private /sys: %w", err)
		}
	}
	if cfg.ReadOnlyMounts {
		if err := readOnlyExcept(cfg.Writable, cfg.Attach); err != nil {
			return err
		}
	}
	for _, b := range cfg.Binds {
		if err := bindMount(b); err != nil {
			return err
		}
	}
	if cfg.NewNet {
		if err := loopbackUp(); err != nil {
			return fmt.Errorf("bringing up loopback: %w", err)
		}
	}
	if cfg.Dir != "" {
		if err := unix.Chdir(cfg.Dir); err != nil {
			return fmt.Errorf("entering %s: %w", cfg.Dir, err)
		}
	}
	if err := unix.Setrlimit(unix.RLIMIT_CORE, &unix.Rlimit{}); err != nil {
		return fmt.Errorf("disabling core dumps: %w", err)
	}
	if err := unix.Prctl(unix.PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0); err != nil {
		return fmt.Errorf("setting no_new_privs: %w", err)
	}
	if cfg.Landlock {
		if err := restrictSelf(cfg.ReadOnly, cfg.ReadDirOnly, cfg.Writable); err != nil {
			return fmt.Errorf("landlock: %w", err)
		}
	}
	if cfg.DropCaps {
		if err := dropCapabilities(); err != nil {
			return fmt.Errorf("dropping capabilities: %w", err)
		}
	}
	if cfg.Seccomp {
		// Last: the filter refuses mount, which the setup above needs.
		if err := installSeccomp(); err != nil {
			return fmt.Errorf("seccomp: %w", err)
		}
	}
	return nil
}

// bindMount pins a path (bind-mounts it onto itself, so it becomes a mount point that
// cannot be renamed or removed) and, for read-only binds, remounts it read-only while
// keeping the flags the kernel locked on the original mount.
func bindMount(b bind) error {
	if err := unix.Mount(b.Path, b.Path, "", unix.MS_BIND, ""); err != nil {
		return fmt.Errorf("bind-mounting %s: %w", b.Path, err)
	}
	if !b.ReadOnly {
		return nil
	}
	var st unix.Statfs_t
	if err := unix.Statfs(b.Path, &st); err != nil {
		return fmt.Errorf("reading mount flags of %s: %w", b.Path, err)
	}
	keep := uintptr(st.Flags) & (unix.MS_NOSUID | unix.MS_NODEV | unix.MS_NOEXEC |
		unix.MS_NOATIME | unix.MS_NODIRATIME | unix.MS_RELATIME)
	if err := unix.Mount("", b.Path, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY|keep, ""); err != nil {
		return fmt.Errorf("remounting %s read-only: %w", b.Path, err)
	}
	return nil
}

// scriptOnFD puts script on descriptor ScriptFD, without close-on-exec, at offset 0:
// a memory file (seekable, so bash's read builtin takes it in blocks, not a byte per
// system call), never argv. Called after closeInheritedFDs, which would mark it.
func scriptOnFD(script []byte) error {
	fd, err := unix.MemfdCreate("toolgate-script", unix.MFD_CLOEXEC)
	if err != nil {
		return fmt.Errorf("creating the script's memory file: %w", err)
	}
	for b := script; len(b) > 0; {
		n, err := unix.Write(fd, b)
		if err != nil {
			unix.Close(fd)
			return fmt.Errorf("writing the script's memory file: %w", err)
		}
		b = b[n:]
	}
	if _, err := unix.Seek(fd, 0, 0); err != nil {
		unix.Close(fd)
		return fmt.Errorf("rewinding the script's memory file: %w", err)
	}
	if fd == ScriptFD { // the config pipe's number, free again
		_, err = unix.FcntlInt(uintptr(fd), unix.F_SETFD, 0)
	} else {
		err = unix.Dup3(fd, ScriptFD, 0)
		unix.Close(fd)
	}
	if err != nil {
		return fmt.Errorf("placing the script on descriptor %d: %w", ScriptFD, err)
	}
	return nil
}

// loopbackUp brings up lo in the fresh network namespace, so commands can use
// 127.0.0.1 among themselves; it reaches nothing outside the namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// dropCapabilities empties the bounding, ambient, inheritable, permitted and effective
// sets of this thread, so the command (root inside its user namespace) cannot undo the
// mounts or regain privileges by exec.
func dropCapabilities() error {
	last := int(unix.CAP_LAST_CAP)
	if b, err := os.ReadFile("/proc/sys/kernel/cap_last_cap"); err == nil {
		if n, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			last = n
		}
	}
	for c := 0; c <= last; c++ {
		if err := unix.Prctl(unix.PR_CAPBSET_DROP, uintptr(c), 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
			return fmt.Errorf("dropping capability %d from the bounding set: %w", c, err)
		}
	}
	if err := unix.Prctl(unix.PR_CAP_AMBIENT, unix.PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0); err != nil && !errors.Is(err, unix.EINVAL) {
		return fmt.Errorf("clearing ambient capabilities: %w", err)
	}
	hdr := unix.CapUserHeader{Version: unix.LINUX_CAPABILITY_VERSION_3}
	var data [2]unix.CapUserData
	if err := unix.Capset(&hdr, &data[0]); err != nil {
		return fmt.Errorf("capset: %w", err)
	}
	return nil
}

// lookPath resolves name against the PATH in env (not the helper's own environment).
func lookPath(name string, env []string) (string, error) {
	if strings.Contains(name, "/") {
		return name, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue
		}
		p := filepath.Join(dir, name)
		if unix.Access(p, unix.X_OK) == nil {
			if st, err := os.Stat(p); err == nil && st.Mode().IsRegular() {
				return p, nil
			}
		}
	}
	return "", fmt.Errorf("executable %q not found in PATH", name)
}
