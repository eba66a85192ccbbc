package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

// TestClaimKilledAnywhereLeavesAStateRecomputeTrusts kills `loopctl graph
// complete` on a blocked item (one provisional save: one fsync, one
// rename) at points spread over its whole run, as a crash would, and after
// every kill requires what a crash must leave: graph-state.json parses
// (the old state or the new, never a torn one), no temporary file is
// taken for it, every event-log line is whole JSON, and `check
// --recompute` still finds the item at implementation, blocked. A power
// cut cannot be staged here; the file's content is fsynced before the
// rename (atomicfile.WriteKeepPrevious), which is what keeps it whole.
func TestClaimKilledAnywhereLeavesAStateRecomputeTrusts(t *testing.T) {
	bin, _ := builtBinaries(t)
	repo := midGraphRepo(t)
	env := []string{"HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}
	dir := filepath.Join(repo, "docs", "specs", "issue-42")
	events := filepath.Join(repo, ".the-loop", "logs", "events.jsonl")
	claim := func() *exec.Cmd {
		cmd := exec.Command(bin, "graph", "complete", "issue-42")
		cmd.Dir, cmd.Env = repo, env
		return cmd
	}
	// How long a whole claim takes here, to spread the kills over it.
	// (A claim that blocks exits non-zero; its answer is on stdout.)
	start := time.Now()
	out, _ := claim().Output()
	require.Contains(t, string(out), `"status": "block"`)
	whole := time.Since(start)

	attempts := func() int {
		data, err := os.ReadFile(filepath.Join(dir, "graph-state.json"))
		require.NoError(t, err)
		st, err := graph.ParseState("issue-42", data)
		require.NoError(t, err, "graph-state.json after a kill:\n%s", data)
		return st.Record("implementation").Attempts
	}
	prev := attempts()
	const kills = 24
	for i := range kills {
		cmd := claim()
		require.NoError(t, cmd.Start())
		time.Sleep(whole * time.Duration(i) / kills)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()

		n := attempts()
		require.Contains(t, []int{prev, prev + 1}, n, "kill %d: the attempt is counted once or not at all", i)
		prev = n
		temps, _ := filepath.Glob(filepath.Join(dir, ".graph-state.json.tmp-*"))
		for _, tmp := range temps {
			require.NoError(t, os.Remove(tmp)) // a killed save's temp file; the next save's sweep takes old ones
		}
		if data, err := os.ReadFile(events); err == nil {
			for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
				if len(line) > 0 {
					require.True(t, json.Valid(line), "kill %d: a torn event-log line %q", i, line)
				}
			}
		}
	}
	check := exec.Command(bin, "check", "issue-42", "--recompute", "--format", "json")
	check.Dir, check.Env = repo, env
	out, _ = check.Output()
	var rep struct {
		CurrentNode string `json:"currentNode"`
		OK          bool   `json:"ok"`
	}
	require.NoError(t, json.Unmarshal(out, &rep), "check --recompute: %s", out)
	require.Equal(t, "implementation", rep.CurrentNode)
	require.False(t, rep.OK)

	// A claim that runs to its end still blocks, and counts its attempt.
	out, _ = claim().Output()
	require.True(t, strings.Contains(string(out), `"status": "block"`) || strings.Contains(string(out), `"status": "escalated"`), "%s", out)
}
