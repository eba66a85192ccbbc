// Command loop-layout lays out a graph for loopd's dashboard: DOT on
// standard input, Graphviz's json0 layout on standard output. loopd runs it
// when a graph page is served (package loop/daemon/dashboard/dotlayout says
// why the engine lives in its own program). Install it beside loopd:
//
//	go install ./cmd/loop-layout
package main

import (
	"os"

	"github.com/theloop-dev/theloop/loop/daemon/dashboard/dotlayout"
)

func main() { os.Exit(dotlayout.Main(os.Stdin, os.Stdout, os.Stderr)) }
