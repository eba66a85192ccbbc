package sandbox

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// Harden is what loopd does to itself first thing: it marks itself
// non-dumpable (no core file with its secrets, no /proc/<pid>/mem for a
// same-user process without CAP_SYS_PTRACE) and scrubs the environment
// block it was started with (ScrubEnviron).
func Harden() error {
	if err := unix.Prctl(unix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		return fmt.Errorf("sandbox: prctl(PR_SET_DUMPABLE, 0): %w", err)
	}
	return ScrubEnviron()
}

// ScrubEnviron keeps the environment in this process's memory (os.Getenv
// and children see the same variables) but zeroes the block the kernel
// shows as /proc/<pid>/environ. Landlock denies a sandboxed agent
// /proc/<pid>/mem of loopd, but (as measured on Linux 6.18) not that
// file, which is read under the weaker PTRACE_MODE_READ; loopd's secrets
// (the webhook secret, GH_TOKEN) must not be there to read.
//
// The variables are copied to the heap first: Go's runtime refers to the
// original block, which afterwards reads as empty.
func ScrubEnviron() error {
	env := os.Environ()
	kept := make([][2]string, 0, len(env))
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		kept = append(kept, [2]string{strings.Clone(k), strings.Clone(v)})
	}
	os.Clearenv()
	for _, kv := range kept {
		if err := os.Setenv(kv[0], kv[1]); err != nil {
			return fmt.Errorf("sandbox: restoring %s: %w", kv[0], err)
		}
	}
	start, end, err := envBlock()
	if err != nil {
		return err
	}
	if end <= start {
		return nil
	}
	mem, err := os.OpenFile("/proc/self/mem", os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("sandbox: scrubbing the environment block: %w", err)
	}
	defer mem.Close()
	if _, err := mem.WriteAt(make([]byte, end-start), int64(start)); err != nil {
		return fmt.Errorf("sandbox: scrubbing the environment block: %w", err)
	}
	return nil
}

// envBlock reads env_start and env_end, fields 50 and 51 of
// /proc/self/stat (counted after the parenthesised comm, fields 3 on).
func envBlock() (uint64, uint64, error) {
	b, err := os.ReadFile("/proc/self/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("sandbox: %w", err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 49 {
		return 0, 0, fmt.Errorf("sandbox: /proc/self/stat has no environment bounds")
	}
	start, err1 := strconv.ParseUint(f[47], 10, 64)
	end, err2 := strconv.ParseUint(f[48], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("sandbox: unreadable environment bounds in /proc/self/stat")
	}
	return start, end, nil
}
