//go:build unix

package main

import (
	"io"
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

// limitAddressSpace caps the process's address space (RLIMIT_AS).
func limitAddressSpace(bytes uint64) {
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: bytes, Max: bytes})
}

// disableCoreDumps sets RLIMIT_CORE to 0: a fatal error ends loop-gate with
// SIGABRT (see supervise.go), which must not leave a core file in the
// agent's working directory.
func disableCoreDumps() {
	_ = syscall.Setrlimit(syscall.RLIMIT_CORE, &syscall.Rlimit{})
}

// hideCrashText points file descriptor 2 — where the Go runtime prints a
// fatal error — at /dev/null and returns a writer on the original stderr
// for loop-gate's own notes. The Gemini CLI reads any exit code but 0 and
// 1 *with text* as "block" (the text becoming the reason the agent sees),
// and a fatal error ends the process with SIGABRT: without the runtime's
// text on either pipe, Gemini reads the crash as a hook that said nothing,
// and the agent stops. On any failure errOut is returned unchanged.
func hideCrashText(errOut io.Writer) io.Writer {
	saved, err := syscall.Dup(2)
	if err != nil {
		return errOut
	}
	null, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		syscall.Close(saved)
		return errOut
	}
	defer null.Close()
	if err := unix.Dup2(int(null.Fd()), 2); err != nil {
		syscall.Close(saved)
		return errOut
	}
	syscall.CloseOnExec(saved)
	return os.NewFile(uintptr(saved), "stderr")
}
