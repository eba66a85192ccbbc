package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"strconv"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/loop/stopgate"
)

// loop-gate's promise: an internal failure never reaches the harness as exit
// status 2, which Claude Code reads as "block". It is kept in this process,
// without a supervising second process (a second start of a Go binary, on
// every stop, doubled the hook's cost):
//
//   - a panic on the check's goroutine is recovered (here and in
//     stopgate.Evaluate) and lets the agent stop, exit 0;
//   - a fatal error the runtime cannot recover from — out of memory, a
//     panic on another goroutine, a stack overflow, concurrent map writes —
//     ends the process with SIGABRT instead of exit 2 (the traceback level
//     "crash", set first thing), with no core file (RLIMIT_CORE 0). A shell
//     running the hook reports 134, Claude Code a non-blocking error: the
//     agent stops and the runtime's message is shown;
//   - a check that outlives its deadline is answered for by a timer that
//     lets the agent stop, exit 0, whatever the check's goroutine is stuck
//     in;
//   - what the check reads is bounded before it is parsed (the payload, the
//     harness config, graph-state.json and the artifacts have size caps, YAML
//     a depth cap), so running out of memory takes a bug, not a big file.
//
// The answer and the notes are buffered and written once, by whichever of
// the check and the timer finishes first, so a late check never adds to the
// timer's answer.
const (
	// memoryLimitEnv caps the address space in MiB (RLIMIT_AS), turning a
	// runaway allocation into a fatal error (SIGABRT, see above). Unset: no
	// cap beyond the soft heap limit.
	memoryLimitEnv = "THE_LOOP_GATE_MEMORY_LIMIT_MB"
	// softHeapLimit is the check's GOMEMLIMIT-style soft limit.
	softHeapLimit = 512 << 20
	// deadlineGrace is the time the check is given beyond its own deadline
	// (stopgate.Options.Timeout, which it honours where it can) before the
	// timer answers for it.
	deadlineGrace = 3 * time.Second
	// maxOutput bounds what is kept of the check's output.
	maxOutput = 1 << 20
	// timeoutEnv sets the check's deadline in seconds (default
	// stopgate.DefaultTimeout); keep it below the harness's hook timeout.
	timeoutEnv = "THE_LOOP_GATE_TIMEOUT_SECONDS"
)

// checkTimeout is the check's deadline: $THE_LOOP_GATE_TIMEOUT_SECONDS when
// it is a whole number of seconds from 1 to 600, else the default.
func checkTimeout() time.Duration {
	if n, err := strconv.Atoi(os.Getenv(timeoutEnv)); err == nil && n >= 1 && n <= 600 {
		return time.Duration(n) * time.Second
	}
	return stopgate.DefaultTimeout
}

// checkFault, when set, runs where the check runs, before it: a build with
// the loopgate_faults tag (fault.go) sets it so that the tests can make the
// check hang or fail fatally. Nil in the binary loop-gate ships as.
var checkFault func()

// supervise answers one stop in this process and returns loop-gate's exit
// code: 0, or 1 for bad usage — never 2 (see above).
func supervise(argv []string, in io.Reader, out, errOut io.Writer) int {
	// Before anything that can fail fatally.
	debug.SetTraceback("crash")
	disableCoreDumps()
	if d := harness.ByName(arg(argv)); d != nil && d.Gate.CrashTextBlocks {
		// Such a harness (Gemini) reads exit 134 with the runtime's text
		// as a block.
		errOut = hideCrashText(errOut)
	}
	debug.SetMemoryLimit(softHeapLimit)
	if mb, err := strconv.Atoi(os.Getenv(memoryLimitEnv)); err == nil && mb > 0 {
		limitAddressSpace(uint64(mb) << 20)
	}

	var answered sync.Mutex // held by whichever of the check and the timer answers
	deadline := checkTimeout() + deadlineGrace
	timer := time.AfterFunc(deadline, func() {
		if answered.TryLock() {
			fmt.Fprintf(errOut, "loop-gate: the check did not finish within %s and was stopped; letting the agent stop\n", deadline)
			os.Exit(0)
		}
	})
	// answer writes the check's answer unless the timer has answered.
	answer := func(code int, stdout, stderr []byte) int {
		if !answered.TryLock() {
			select {} // the timer is answering; it ends the process
		}
		timer.Stop()
		out.Write(stdout)
		errOut.Write(stderr)
		return code
	}

	var payload []byte
	if in != nil {
		var err error
		payload, err = stopgate.ReadPayload(in, stopgate.MaxPayloadBytes, stopgate.DefaultStdinTimeout)
		if err != nil {
			return answer(0, nil, fmt.Appendf(nil, "loop-gate: %v; letting the agent stop\n", err))
		}
	}
	stdout := &capped{limit: maxOutput}
	stderr := &capped{limit: maxOutput}
	code, failure := check(argv, payload, stdout, stderr)
	if failure != "" {
		// A check that panicked has no answer, only what it said.
		return answer(0, nil, append(stderr.Bytes(), failure...))
	}
	if code != 1 {
		code = 0 // 1: bad usage, a non-blocking error to both harnesses
	}
	return answer(code, stdout.Bytes(), stderr.Bytes())
}

// check runs the stop's check on its payload, turning a panic into a note.
func check(argv []string, payload []byte, stdout, stderr io.Writer) (code int, failure string) {
	defer func() {
		if p := recover(); p != nil {
			failure = fmt.Sprintf("loop-gate: the check failed (%v); letting the agent stop — run `loopctl check <work-item> --recompute` to see why\n", p)
		}
	}()
	if checkFault != nil {
		checkFault()
	}
	return run(argv, bytes.NewReader(payload), stdout, stderr), ""
}

// capped is a buffer that keeps at most limit bytes.
type capped struct {
	bytes.Buffer
	limit int
}

func (c *capped) Write(p []byte) (int, error) {
	if room := c.limit - c.Len(); room > 0 {
		if len(p) > room {
			c.Buffer.Write(p[:room])
		} else {
			c.Buffer.Write(p)
		}
	}
	return len(p), nil
}
