package stopgate

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// DefaultMaxAttempts is how many times the gate blocks the same work item at
// the same node before it gives up (ARCHITECTURE decision 12).
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

// Counters are the gate's attempt counters: one small file per (repository,
// work item, node) holding the number of consecutive blocks. A missing or
// corrupt file counts as 0. Writes are atomic (temp file + rename). Two gates
// racing on the same item can lose an increment, never corrupt a file.
type Counters struct {
	Dir string
}

// itemKey names a (repository, work item) pair; every counter of the pair
// starts with it, so the pair's counters can be cleared together.
func itemKey(repoRoot, workItem string) string {
	sum := sha256.Sum256([]byte(repoRoot + "\x00" + workItem))
	return hex.EncodeToString(sum[:8])
}

func (c Counters) path(repoRoot, workItem, node string) string {
	sum := sha256.Sum256([]byte(node))
	return filepath.Join(c.Dir, itemKey(repoRoot, workItem)+"-"+hex.EncodeToString(sum[:8]))
}

// Get returns the recorded attempts (0 when missing or unreadable).
func (c Counters) Get(repoRoot, workItem, node string) int {
	data, err := os.ReadFile(c.path(repoRoot, workItem, node))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// Increment records one more block at node and returns the new count. The
// work item's counters at other nodes are cleared: attempts count
// consecutive blocks at one node, so moving on starts afresh.
func (c Counters) Increment(repoRoot, workItem, node string) (int, error) {
	n := c.Get(repoRoot, workItem, node) + 1
	keep := c.path(repoRoot, workItem, node)
	if err := c.clear(repoRoot, workItem, keep); err != nil {
		return n, err
	}
	if err := os.MkdirAll(c.Dir, 0o700); err != nil {
		return n, fmt.Errorf("creating the attempt counter directory: %w", err)
	}
	return n, writeAtomic(keep, []byte(strconv.Itoa(n)+"\n"))
}

// Reset clears every counter of the work item in the repository.
func (c Counters) Reset(repoRoot, workItem string) error {
	return c.clear(repoRoot, workItem, "")
}

func (c Counters) clear(repoRoot, workItem, keep string) error {
	entries, err := os.ReadDir(c.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("reading the attempt counters: %w", err)
	}
	prefix := itemKey(repoRoot, workItem) + "-"
	var errs []error
	for _, e := range entries {
		m := filepath.Join(c.Dir, e.Name())
		if !strings.HasPrefix(e.Name(), prefix) || m == keep {
			continue
		}
		if err := os.Remove(m); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

func writeAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return fmt.Errorf("writing the attempt counter: %w", err)
	}
	tmp := f.Name()
	_, werr := f.Write(data)
	cerr := f.Close()
	if err := errors.Join(werr, cerr); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the attempt counter: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the attempt counter: %w", err)
	}
	return nil
}
