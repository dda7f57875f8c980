package cli

import (
	"context"
	"io"
	"testing"

	"golang.org/x/sys/unix"
)

// TestRunStopsDescriptorInheritance: a descriptor toolgate inherited without
// close-on-exec (as a careless parent leaves them) must not reach the children toolgate
// starts, so Run marks it close-on-exec before any command runs.
func TestRunStopsDescriptorInheritance(t *testing.T) {
	var p [2]int
	if err := unix.Pipe2(p[:], 0); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[0])
	defer unix.Close(p[1])
	for _, fd := range p {
		if flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err != nil || flags&unix.FD_CLOEXEC != 0 {
			t.Fatalf("setup: fd %d flags %d, %v", fd, flags, err)
		}
	}
	if code := Run(context.Background(), []string{"--help"}, Stdio{Out: io.Discard, Err: io.Discard}); code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, fd := range p {
		flags, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err != nil || flags&unix.FD_CLOEXEC == 0 {
			t.Errorf("fd %d still inheritable after Run (flags %d, %v)", fd, flags, err)
		}
	}
}
