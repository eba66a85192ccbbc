//go:build loopgate_faults

package main

import (
	"os"
	"time"
)

// A loop-gate built with the loopgate_faults tag (the tests build one; the
// shipped binary has none of this) fails on demand where the check runs, so
// that the tests can show what the harness sees when the check hangs or
// fails fatally: $THE_LOOP_GATE_FAULT is
//
//	hang              the check blocks forever, deaf to its deadline
//	goroutine-panic   a goroutine of the check panics (unrecoverable)
func init() {
	switch os.Getenv("THE_LOOP_GATE_FAULT") {
	case "hang":
		checkFault = func() {
			for {
				time.Sleep(time.Hour)
			}
		}
	case "goroutine-panic":
		checkFault = func() {
			go func() { panic("injected fault on another goroutine") }()
			time.Sleep(time.Minute)
		}
	}
}
