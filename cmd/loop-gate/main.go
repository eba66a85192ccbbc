// Command loop-gate is theloop's harness Stop hook. Claude Code, Cursor,
// the Codex CLI and the Gemini CLI run it when the agent is about to stop;
// it checks the work item's current node (`loopctl check --recompute`,
// in-process) and, while that node blocks, keeps the agent working — at
// most three times in a row per node.
//
//	loop-gate claude   # Claude Code: {"decision":"block","reason":...}
//	loop-gate cursor   # Cursor: {"followup_message":...}
//	loop-gate codex    # Codex CLI Stop hook: {"decision":"block","reason":...}
//	loop-gate gemini   # Gemini CLI AfterAgent hook: {"decision":"deny","reason":...}
//
// It exits 0 (1 for bad usage) and lets the agent stop on any internal
// error; a fatal one (out of memory) ends it with SIGABRT, never with exit
// 2, which Claude Code and Codex would read as "block" — and for Gemini,
// which reads any code but 0 and 1 with text as "block", the runtime's
// crash text never reaches the pipe Gemini reads (supervise.go). `loopctl
// install` registers it.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/internal/buildinfo"
	"github.com/theloop-dev/theloop/loop/stopgate"
)

// version is stamped at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/loop-gate
var version = ""

var usage = `usage: loop-gate [` + strings.Join(harness.Names(), "|") + `]

The harness Stop hook of theloop. It reads the Stop payload on stdin, checks
the current node of the session's work item ($THE_LOOP_WORK_ITEM, else the
session registry) and answers in the harness's format. Install it with
"loopctl install".

Environment:
  THE_LOOP_WORK_ITEM             the work item (set by the daemon in its sessions)
  THE_LOOP_TRUST_KEYS            trusted decision-signing keys (ed25519:...)
  THE_LOOP_TRUST_BASE            a git revision whose .the-loop/trusted-keys is trusted
  THE_LOOP_GATE_MAX_ATTEMPTS     blocks per work item and node before giving up (3)
  THE_LOOP_GATE_TIMEOUT_SECONDS  the check's deadline (25)
  THE_LOOP_GATE_MEMORY_LIMIT_MB  cap on the check's address space (none)
`

func init() {
	// A process that lives for milliseconds has no use for heap profiling,
	// whose bucket tables cost page faults on every start.
	runtime.MemProfileRate = 0
}

func main() {
	if a := arg(os.Args); a == "" || harness.Known(a) {
		os.Exit(supervise(os.Args, stdin(), os.Stdout, os.Stderr))
	}
	// --version, --help, bad usage: nothing to supervise.
	os.Exit(run(os.Args, stdin(), os.Stdout, os.Stderr))
}

func arg(argv []string) string {
	if len(argv) == 2 {
		return argv[1]
	}
	if len(argv) == 1 {
		return ""
	}
	return "-"
}

// stdin is the payload stream, nil when stdin is a terminal (run by hand).
func stdin() io.Reader {
	if st, err := os.Stdin.Stat(); err == nil && st.Mode()&os.ModeCharDevice != 0 {
		return nil
	}
	return os.Stdin
}

func run(argv []string, in io.Reader, out, errOut io.Writer) int {
	arg := ""
	if len(argv) > 1 {
		arg = argv[1]
	}
	switch arg {
	case "--version", "-version", "version":
		fmt.Fprintln(out, "loop-gate", versionString())
		return 0
	case "--help", "-help", "-h", "help":
		fmt.Fprint(out, usage)
		return 0
	}
	if len(argv) > 2 {
		fmt.Fprintf(errOut, "loop-gate: one argument, %s; got %d\n%s", harness.List(harness.Names()), len(argv)-1, usage)
		return 1
	}
	h, err := stopgate.ParseHarness(arg)
	if err != nil {
		// Exit 1 is a non-blocking error to every harness: the agent
		// stops and the misconfigured hook is visible.
		fmt.Fprintf(errOut, "loop-gate: %v\n%s", err, usage)
		return 1
	}
	return stopgate.Run(context.Background(), stopgate.Options{Harness: h, Stdin: in, Stdout: out, Stderr: errOut, Timeout: checkTimeout()})
}

// versionString is the stamped version, else the module's build info.
func versionString() string { return buildinfo.Version(version) }
