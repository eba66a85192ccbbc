package stopgate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"github.com/theloop-dev/theloop/internal/atomicfile"
)

// DefaultMaxAttempts is how many times the gate blocks the same work item at
// the same node before it gives up (docs/decisions.md §12).
const DefaultMaxAttempts = 3

// MaxAttemptsEnv overrides DefaultMaxAttempts.
const MaxAttemptsEnv = "THE_LOOP_GATE_MAX_ATTEMPTS"

// ParseMaxAttempts reads THE_LOOP_GATE_MAX_ATTEMPTS: empty or not an integer
// → DefaultMaxAttempts; below 1 → 1.
func ParseMaxAttempts(s string) int {
	n, err := strconv.Atoi(strings.TrimSpace(s))
	switch {
	case err != nil:
		return DefaultMaxAttempts
	case n < 1:
		return 1
	}
	return n
}

// DefaultCounterDir is where attempt counters live: <user cache>/theloop/gate,
// else <temp>/theloop-gate-<uid>. Never inside a repository: the agent being
// gated must not be able to reset its own counter by editing its checkout.
func DefaultCounterDir() string {
	if d, err := os.UserCacheDir(); err == nil && d != "" {
		return filepath.Join(d, "theloop", "gate")
	}
	return filepath.Join(os.TempDir(), "theloop-gate-"+strconv.Itoa(os.Getuid()))
}

// Counters are the gate's attempt counters. Attempts count consecutive
// blocks of one work item at one node: each (repository, work item) has one
// small file, named by a hash of the two, holding "<attempts> <node>". A
// block at another node starts again from 1; a satisfied check removes the
// file. A missing or corrupt file counts as 0. Writes are atomic (temp file
// + rename). Two gates racing on the same item can lose an increment, never
// corrupt a file.
//
// One file per work item rather than per node keeps a stop to one read and
// one write — no directory scan to forget the other nodes.
type Counters struct {
	Dir string
}

func (c Counters) path(repoRoot, workItem string) string {
	sum := sha256.Sum256([]byte(repoRoot + "\x00" + workItem))
	return filepath.Join(c.Dir, hex.EncodeToString(sum[:12]))
}

// Get returns the recorded consecutive blocks at node (0 when the work
// item's counter is missing, unreadable, or counts another node).
func (c Counters) Get(repoRoot, workItem, node string) int {
	data, err := readSmallRegular(c.path(repoRoot, workItem))
	if err != nil {
		return 0
	}
	count, recorded, ok := strings.Cut(strings.TrimSuffix(string(data), "\n"), " ")
	if !ok || recorded != node {
		return 0
	}
	n, err := strconv.Atoi(count)
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Increment records one more block at node and returns the new count.
func (c Counters) Increment(repoRoot, workItem, node string) (int, error) {
	n := c.Get(repoRoot, workItem, node) + 1
	if err := replaceCounter(c.Dir, c.path(repoRoot, workItem), []byte(strconv.Itoa(n)+" "+node+"\n")); err != nil {
		return n, fmt.Errorf("writing the attempt counter: %w", err)
	}
	return n, nil
}

// Reset clears the work item's counter.
func (c Counters) Reset(repoRoot, workItem string) error {
	if err := os.Remove(c.path(repoRoot, workItem)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("clearing the attempt counter: %w", err)
	}
	return nil
}

// replaceCounter replaces a counter file, creating its directory (0700)
// when missing. Counters may be lost; they are not worth an fsync on every
// stop.
func replaceCounter(dir, path string, data []byte) error {
	err := atomicfile.Replace(path, data, 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(dir, 0o700); err == nil {
			err = atomicfile.Replace(path, data, 0o600)
		}
	}
	return err
}

// readSmallRegular reads a counter file: opened without blocking (a named
// pipe in its place must not hang the gate), only when regular, at most 4 KB.
func readSmallRegular(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", path)
	}
	return io.ReadAll(io.LimitReader(f, 4096))
}
