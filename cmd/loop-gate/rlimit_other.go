//go:build !unix

package main

import "io"

// limitAddressSpace is not available here; the soft heap limit remains.
func limitAddressSpace(uint64) {}

// disableCoreDumps: no core files to prevent here.
func disableCoreDumps() {}

// hideCrashText: see the unix version; here errOut stays as it is.
func hideCrashText(errOut io.Writer) io.Writer { return errOut }
