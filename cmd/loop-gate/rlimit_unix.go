//go:build unix

package main

import "syscall"

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
