//go:build !unix

package main

// limitAddressSpace is not available here; the soft heap limit remains.
func limitAddressSpace(uint64) {}

// disableCoreDumps: no core files to prevent here.
func disableCoreDumps() {}
