//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package agent

import (
	"errors"

	"golang.org/x/sys/unix"
)

// characterMode switches the terminal on fd to character-at-a-time input
// without echo (the program echoes, as an agent TUI does), keeping output
// processing and signals (Ctrl-C still interrupts). It returns the function
// that restores the previous mode. Not a terminal: an error.
func characterMode(fd int) (restore func(), err error) {
	t, err := unix.IoctlGetTermios(fd, ioctlGetTermios)
	if err != nil {
		return nil, errors.New("standard input is not a terminal")
	}
	old := *t
	t.Lflag &^= unix.ICANON | unix.ECHO
	t.Cc[unix.VMIN] = 1
	t.Cc[unix.VTIME] = 0
	if err := unix.IoctlSetTermios(fd, ioctlSetTermios, t); err != nil {
		return nil, err
	}
	return func() { _ = unix.IoctlSetTermios(fd, ioctlSetTermios, &old) }, nil
}
