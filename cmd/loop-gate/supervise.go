package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"runtime/debug"
	"strconv"
	"time"

	"github.com/theloop-dev/theloop/loop/stopgate"
)

// A Go program cannot catch its own fatal errors: running out of memory, a
// stack overflow or a runtime fault exit with status 2 — which Claude Code
// reads as "block". So loop-gate checks in a child process, a second run of
// its own binary, and answers for it: the child's answer when it exits 0,
// else an allowing exit 0 with a note. The parent also holds the deadline:
// stdin is read with one, and a child still running at the end of the
// check's deadline is killed.
const (
	// childEnv marks the child run.
	childEnv = "THE_LOOP_GATE_CHILD"
	// memoryLimitEnv caps the child's address space in MiB (RLIMIT_AS),
	// turning a runaway allocation into a fatal error the parent answers
	// for. Unset: no cap beyond the soft heap limit.
	memoryLimitEnv = "THE_LOOP_GATE_MEMORY_LIMIT_MB"
	// softHeapLimit is the child's GOMEMLIMIT-style soft limit.
	softHeapLimit = 512 << 20
	// childGrace is the time the child is given beyond the check's own
	// deadline to answer.
	childGrace = 3 * time.Second
	// maxChildOutput bounds what the parent keeps of the child's output.
	maxChildOutput = 1 << 20
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

// isChild reports whether this process is the supervised check.
func isChild() bool { return os.Getenv(childEnv) == "1" }

// childSetup applies the child's memory limits.
func childSetup() {
	debug.SetMemoryLimit(softHeapLimit)
	if mb, err := strconv.Atoi(os.Getenv(memoryLimitEnv)); err == nil && mb > 0 {
		limitAddressSpace(uint64(mb) << 20)
	}
}

// supervise runs the check in a child and returns loop-gate's exit code:
// the child's 0 or 1 (bad usage), never anything else.
func supervise(argv []string, in io.Reader, out, errOut io.Writer) int {
	var payload []byte
	if in != nil {
		var err error
		payload, err = stopgate.ReadPayload(in, stopgate.MaxPayloadBytes, stopgate.DefaultStdinTimeout)
		if err != nil {
			fmt.Fprintf(errOut, "loop-gate: %v; letting the agent stop\n", err)
			return 0
		}
	}
	exe, err := os.Executable()
	if err != nil {
		fmt.Fprintf(errOut, "loop-gate: cannot find its own binary (%v); letting the agent stop\n", err)
		return 0
	}
	deadline := checkTimeout() + childGrace
	ctx, cancel := context.WithTimeout(context.Background(), deadline)
	defer cancel()
	cmd := exec.CommandContext(ctx, exe, argv[1:]...)
	cmd.Env = append(os.Environ(), childEnv+"=1")
	cmd.Stdin = bytes.NewReader(payload)
	stdout := &capped{limit: maxChildOutput}
	stderr := &capped{limit: maxChildOutput}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.WaitDelay = time.Second
	runErr := cmd.Run()
	code := 0
	var ee *exec.ExitError
	switch {
	case runErr == nil:
	case errors.As(runErr, &ee):
		code = ee.ExitCode()
	default:
		fmt.Fprintf(errOut, "loop-gate: the check could not run (%v); letting the agent stop\n", runErr)
		return 0
	}
	if ctx.Err() != nil {
		errOut.Write(stderr.Bytes())
		fmt.Fprintf(errOut, "loop-gate: the check did not finish within %s and was stopped; letting the agent stop\n", deadline)
		return 0
	}
	switch code {
	case 0, 1:
		// 0: the answer; 1: bad usage, which both harnesses treat as a
		// non-blocking error.
		out.Write(stdout.Bytes())
		errOut.Write(stderr.Bytes())
		return code
	}
	// A fatal error (out of memory, a runtime fault) or a signal: the
	// answer, if any, is incomplete. Let the agent stop, and say why.
	// The head of the child's stderr holds the fatal error's message.
	head := stderr.Bytes()
	if len(head) > 4096 {
		head = head[:4096]
	}
	errOut.Write(head)
	fmt.Fprintf(errOut, "\nloop-gate: the check failed (%v); letting the agent stop — run `loopctl check <work-item> --recompute` to see why\n", runErr)
	return 0
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
