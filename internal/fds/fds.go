// Package fds keeps descriptors a process inherited from reaching the
// programs it starts. A shell or a CI runner may start agentbox with
// descriptors open beyond stdin, stdout and stderr (`9</root/secret`, a
// runner's log pipe); exec passes every descriptor without close-on-exec to
// the next program, so without this they would reach bubblewrap, the
// guest, Xvfb, Openbox and the app. Go opens its own descriptors
// close-on-exec and hands a child exactly its exec.Cmd's Stdin, Stdout,
// Stderr and ExtraFiles (clearing the flag on those), so marking every
// inherited descriptor close-on-exec changes nothing else.
package fds

import (
	"errors"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// CloseOnExec marks every descriptor from first upwards close-on-exec:
// close_range(2) with CLOSE_RANGE_CLOEXEC (Linux 5.11), else each
// descriptor listed in /proc/self/fd. The process itself keeps using them.
func CloseOnExec(first int) error {
	err := unix.CloseRange(uint(first), ^uint(0), unix.CLOSE_RANGE_CLOEXEC)
	if err == nil || !(errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EINVAL)) {
		if err != nil {
			return fmt.Errorf("close_range: %w", err)
		}
		return nil
	}
	if err := closeOnExecEach(first); err != nil {
		return fmt.Errorf("close_range is not available and %w", err)
	}
	return nil
}

// closeOnExecEach is CloseOnExec without close_range.
func closeOnExecEach(first int) error {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return fmt.Errorf("/proc/self/fd: %w", err)
	}
	var errs []error
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < first {
			continue
		}
		// The listing's own descriptor is closed by now: EBADF.
		if _, err := unix.FcntlInt(uintptr(fd), unix.F_SETFD, unix.FD_CLOEXEC); err != nil && !errors.Is(err, unix.EBADF) {
			errs = append(errs, fmt.Errorf("descriptor %d: %w", fd, err))
		}
	}
	return errors.Join(errs...)
}

// Inherited lists the descriptors from first upwards that are not
// close-on-exec: those the next exec would pass on.
func Inherited(first int) ([]int, error) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return nil, err
	}
	names, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	var out []int
	for _, n := range names {
		fd, err := strconv.Atoi(n)
		if err != nil || fd < first {
			continue
		}
		fl, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0)
		if err == nil && fl&unix.FD_CLOEXEC == 0 {
			out = append(out, fd)
		}
	}
	return out, nil
}
