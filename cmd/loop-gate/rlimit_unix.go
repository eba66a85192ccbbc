//go:build unix

package main

import "syscall"

// limitAddressSpace caps the process's address space (RLIMIT_AS).
func limitAddressSpace(bytes uint64) {
	_ = syscall.Setrlimit(syscall.RLIMIT_AS, &syscall.Rlimit{Cur: bytes, Max: bytes})
}
