//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

// measured runs bin like runBin and also reports the child's peak resident
// memory in bytes (getrusage; Linux reports kilobytes).
func measured(t *testing.T, bin, dir string, env []string, stdin []byte, args ...string) (procResult, int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = dir
	home := t.TempDir()
	cmd.Env = append([]string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "THE_LOOP_STATE_ROOT=" + filepath.Join(home, "state")}, env...)
	cmd.Stdin = bytes.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else {
		require.NoError(t, err)
	}
	var rss int64
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		rss = ru.Maxrss * 1024
	}
	return procResult{code, out.String(), errOut.String()}, rss
}

// TestOversizedStateIsACorruptCache: an agent that grows graph-state.json
// to 1 GB (sparse here: os.Truncate makes it cheap) must not cost CI or the
// Stop hook a gigabyte. Before the cap, `check --recompute` took 40 s and
// 4.3 GB, loop-gate 2.1 GB. Now the file is refused from its size alone and
// treated as unparseable (docs/decisions.md §5): the state is
// reconstructed from the artifacts, the warning names the file, its size and
// the cap, and the file is left in place.
func TestOversizedStateIsACorruptCache(t *testing.T) {
	repo, _ := signedCheckout(t)
	state := filepath.Join(repo, "docs/specs/issue-42", loop.StateFileName)
	// The same checkout with a small unparseable state, for comparison
	// (copied before the state grows: a copy would not stay sparse).
	small := t.TempDir()
	require.NoError(t, os.CopyFS(small, os.DirFS(repo)))
	require.NoError(t, os.WriteFile(filepath.Join(small, "docs/specs/issue-42", loop.StateFileName), []byte("not json"), 0o644))
	const size = 1 << 30
	require.NoError(t, os.Truncate(state, size))

	ctl, gate := builtBinaries(t)
	r, ctlRSS := measured(t, ctl, repo, nil, nil, "check", "issue-42", "--recompute", "--format", "json", "--repo", repo)
	var rep struct {
		CurrentNode string   `json:"currentNode"`
		Warnings    []string `json:"warnings"`
	}
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "stdout %q stderr %q", r.stdout, r.stderr)
	assert.NotEmpty(t, rep.CurrentNode, "the state was reconstructed from the artifacts")
	require.NotEmpty(t, rep.Warnings)
	assert.Contains(t, rep.Warnings[0], "graph-state.json could not be parsed")
	assert.Contains(t, rep.Warnings[0], fmt.Sprintf("is %d bytes, more than the %d", size, loop.MaxStateBytes), "the warning gives the size and the cap")

	payload := fmt.Appendf(nil, `{"session_id":"s1","cwd":%q,"hook_event_name":"Stop","stop_hook_active":false}`, repo)
	g, gateRSS := measured(t, gate, repo, []string{"THE_LOOP_WORK_ITEM=issue-42"}, payload, "claude")
	assert.Equal(t, 0, g.code, "loop-gate answers Claude Code with exit 0; stderr %q", g.stderr)

	// The Stop hook answers exactly as it does for a small unparseable
	// state: an oversized cache is a corrupt cache, nothing more, nothing less.
	smallPayload := fmt.Appendf(nil, `{"session_id":"s1","cwd":%q,"hook_event_name":"Stop","stop_hook_active":false}`, small)
	want, _ := measured(t, gate, small, []string{"THE_LOOP_WORK_ITEM=issue-42"}, smallPayload, "claude")
	assert.Equal(t, want.code, g.code)
	assert.Equal(t, want.stdout, g.stdout, "reconstructed at %s", rep.CurrentNode)

	t.Logf("reconstructed at %s; loop-gate answered %q", rep.CurrentNode, g.stdout)
	t.Logf("1 GB graph-state.json: check --recompute peak RSS %d MB, loop-gate peak RSS %d MB", ctlRSS>>20, gateRSS>>20)
	// Memory, not time: both stay within a small multiple of the cap, far
	// below the gigabyte they read before.
	assert.Less(t, ctlRSS, int64(256<<20), "check --recompute read the oversized file")
	assert.Less(t, gateRSS, int64(256<<20), "loop-gate read the oversized file")

	fi, err := os.Stat(state)
	require.NoError(t, err, "the oversized file is kept, never deleted")
	assert.Equal(t, int64(size), fi.Size())
}
