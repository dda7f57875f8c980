//go:build linux

package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"time"
)

// SandboxUID and SandboxGID are the host ids a confined command runs as when toolgate
// itself runs as the host's root. Inside the sandbox they are uid and gid 0, as before,
// but on the host they own nothing: discretionary access control then refuses what the
// read-only mounts might miss (chmod or chown of a root-owned file, writing a root-owned
// /proc/sys entry, reading a root-owned owner-only file under a read-only root), and
// RLIMIT_NPROC, which the kernel never enforces for root, applies. 65534 is the
// kernel's overflow id (nobody/nogroup), which by convention owns no files; see
// docs/confinement.md for what sharing it with the host's nobody processes means.
const (
	SandboxUID = 65534
	SandboxGID = 65534
)

// identity is who the sandbox's uid and gid 0 are on the host.
type identity struct {
	uid, gid int
	// remapped is set when toolgate is the host's root and the command runs as
	// SandboxUID instead: the workspace (and any other writable root) is then mounted
	// id-mapped, so that root's files there are the command's own and files it creates
	// belong to root on disk, as they did before.
	remapped bool
}

var hostRoot = sync.OnceValue(isHostRoot)

// currentIdentity is the identity every call gets.
func currentIdentity() identity {
	if hostRoot() {
		return identity{uid: SandboxUID, gid: SandboxGID, remapped: true}
	}
	return identity{uid: os.Getuid(), gid: os.Getgid()}
}

// isHostRoot reports whether toolgate is uid 0 of the initial user namespace (uid 0 of
// a container's own user namespace is already an unprivileged id on the host).
func isHostRoot() bool {
	if os.Getuid() != 0 {
		return false
	}
	f, err := os.Open("/proc/self/uid_map")
	if err != nil {
		return true // no user namespaces to be in: the real root
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 3 && fields[0] == "0" {
			return fields[1] == "0"
		}
	}
	return false
}

// apply sets the user namespace's mappings (and, when remapped, the credentials the
// child takes inside it) on attr.
func (id identity) apply(attr *syscall.SysProcAttr) {
	attr.UidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: id.uid, Size: 1}}
	attr.GidMappings = []syscall.SysProcIDMap{{ContainerID: 0, HostID: id.gid, Size: 1}}
	if !id.remapped {
		// An unprivileged parent may map only its own ids, and only with setgroups
		// denied; the supplementary groups it has stay.
		attr.GidMappingsEnableSetgroups = false
		return
	}
	// The child becomes uid/gid 0 of its namespace, i.e. SandboxUID/SandboxGID on the
	// host, and drops root's supplementary groups (setgroups must be allowed for that;
	// the command, without capabilities, cannot call it).
	attr.GidMappingsEnableSetgroups = true
	attr.Credential = &syscall.Credential{Uid: 0, Gid: 0, Groups: []uint32{}}
}

// describe says who commands run as, for Capabilities.
func (id identity) describe() string {
	if id.remapped {
		return fmt.Sprintf("uid %d, gid %d on the host (uid/gid 0 inside): toolgate runs as root, so commands run as an unprivileged id; the workspace is mounted id-mapped so root's files there stay the command's own", id.uid, id.gid)
	}
	return fmt.Sprintf("toolgate's own uid %d, gid %d (uid/gid 0 inside)", id.uid, id.gid)
}

// idmapUserNS is a user namespace holding the sandbox's mapping (0 = SandboxUID), kept
// open for the life of the process: id-mapped mounts are made with it. It is the user
// namespace of a helper started once and then let exit.
var idmapUserNS = sync.OnceValues(func() (*os.File, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var ns *os.File
	_, setupErr, err := runHelper(ctx, helperRun{
		cfg:   helperConfig{Mode: "probe", Env: []string{"PATH=/usr/bin:/bin"}},
		flags: syscall.CLONE_NEWUSER,
		id:    currentIdentity(),
		started: func(pid int) error {
			f, err := os.Open(fmt.Sprintf("/proc/%d/ns/user", pid))
			ns = f
			return err
		},
		stdout: io.Discard, stderr: io.Discard,
	})
	if err == nil && setupErr != "" {
		err = fmt.Errorf("%s", setupErr)
	}
	if err != nil {
		if ns != nil {
			ns.Close()
		}
		return nil, fmt.Errorf("creating the user namespace for id-mapped mounts: %w", err)
	}
	return ns, nil
})
