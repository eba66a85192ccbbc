// Command loopctl is theloop's CLI for operators, agents and CI: check a
// work item against its process graph, claim a node's work done, walk,
// force and skip, show and verify graphs, read the event log, install the
// harness Stop hook, and run a demo of the whole loop.
//
//	loopctl check issue-42 --recompute --fail-on block
//	loopctl graph complete issue-42
//	go run ./cmd/loopctl demo
package main

import (
	"os"
	"runtime"
)

func init() {
	// As in loop-gate: a process that lives for milliseconds (check
	// --recompute in CI, completion on every tab) has no use for heap
	// profiling, whose bucket tables cost page faults on every start.
	runtime.MemProfileRate = 0
}

func main() {
	os.Exit(Main(os.Args, systemFactory()))
}
