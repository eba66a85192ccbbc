package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

// crashKillsEnv raises the number of SIGKILLs of TestCrashOrdering (issue
// 9 asks for 500; the default run uses fewer to stay quick).
const crashKillsEnv = "THE_LOOP_CRASH_KILLS"

// Issue 9, item 4 and the crash figures: the built loopctl is killed with
// SIGKILL at random moments in complete, advance and force. After the next
// open (a verb that takes the lock), every logged transition is in the
// state, every transition in the state is logged, and no temp file of a
// killed save is left.
func TestCrashOrdering(t *testing.T) {
	ctl, _ := builtBinaries(t)
	kills := 60
	if n, err := strconv.Atoi(os.Getenv(crashKillsEnv)); err == nil && n > 0 {
		kills = n
	}
	base := t.TempDir()
	repo := filepath.Join(base, "repo")
	state := filepath.Join(base, "state")
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".git"), 0o755))
	cfg := filepath.Join(base, "cli-config.yaml")
	require.NoError(t, os.WriteFile(cfg, fmt.Appendf(nil, "state:\n  root: %s\n", state), 0o644))
	env := []string{"HOME=" + base, "PATH=" + os.Getenv("PATH"), "THE_LOOP_CLI_CONFIG=" + cfg}
	specDir := filepath.Join(repo, "docs/specs/issue-1")
	logPath := filepath.Join(state, "logs", "events.jsonl")

	start := func(args ...string) *exec.Cmd {
		cmd := exec.Command(ctl, args...)
		cmd.Dir, cmd.Env = repo, env
		require.NoError(t, cmd.Start())
		return cmd
	}
	verbs := [][]string{
		{"graph", "force", "issue-1", "--to", "design", "--reason", "r"},
		{"graph", "complete", "issue-1"},
		{"graph", "advance", "issue-1"},
		{"graph", "force", "issue-1", "--to", "requirements-definition", "--reason", "r"},
		{"graph", "force", "issue-1", "--to", "implementation", "--reason", "r"},
	}
	rng := rand.New(rand.NewPCG(9, uint64(time.Now().UnixNano())))
	var landed, unloggedLeft, tempsLeft, relogged int
	for i := 0; i < kills; i++ {
		args := append([]string{}, verbs[i%len(verbs)]...)
		if args[1] == "force" {
			args[len(args)-1] = fmt.Sprintf("kill-%d", i)
		}
		cmd := start(args...)
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		_ = cmd.Process.Signal(syscall.SIGKILL)
		_ = cmd.Wait()
		if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			landed++
		}
		// What the kill left behind, before the next open.
		if st := readState(t, specDir); st != nil && len(st.Unlogged) > 0 {
			unloggedLeft++
		}
		temps, _ := filepath.Glob(filepath.Join(specDir, ".graph-state.json.tmp-*"))
		tempsLeft += len(temps)

		// The next open.
		clean := start("graph", "advance", "issue-1")
		_ = clean.Wait()
		temps, _ = filepath.Glob(filepath.Join(specDir, ".graph-state.json.tmp-*"))
		require.Empty(t, temps, "kill %d: temp files after the next open", i)
		st := readState(t, specDir)
		if st == nil {
			continue // killed before the first save
		}
		require.Empty(t, st.Unlogged, "kill %d: the next open logs what was left", i)
		seqs, forced, re := loggedTransitions(t, logPath)
		relogged = re
		for s := range seqs {
			require.LessOrEqual(t, s, st.Seq, "kill %d: an event was logged for transition %d, which the state does not hold", i, s)
		}
		for s := 1; s <= st.Seq; s++ {
			require.True(t, seqs[s], "kill %d: transition %d is in the state but not in the event log", i, s)
		}
		inState := map[string]bool{}
		for _, f := range st.Forced {
			inState[f.Reason] = true
		}
		for reason := range forced {
			require.True(t, inState[reason], "kill %d: graph.forced %q logged but not in state", i, reason)
		}
		for reason := range inState {
			if strings.HasPrefix(reason, "kill-") {
				require.True(t, forced[reason], "kill %d: force %q in state but not logged", i, reason)
			}
		}
	}
	t.Logf("%d SIGKILLs, %d landed mid-verb; %d left a saved-but-unlogged transition, %d temp file(s) left by killed saves; %d event(s) re-logged by the next open; all removed or logged after it",
		kills, landed, unloggedLeft, tempsLeft, relogged)
}

func readState(t *testing.T, dir string) *graph.State {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, "graph-state.json"))
	if os.IsNotExist(err) {
		return nil
	}
	require.NoError(t, err)
	st, err := graph.ParseState("issue-1", data)
	require.NoError(t, err, "the state file is never torn")
	return st
}

// loggedTransitions reads the event log: the transition numbers logged, the
// reasons of logged forces, and how many lines were re-logged.
func loggedTransitions(t *testing.T, path string) (map[int]bool, map[string]bool, int) {
	t.Helper()
	seqs, forced := map[int]bool{}, map[string]bool{}
	relogged := 0
	f, err := os.Open(path)
	if os.IsNotExist(err) {
		return seqs, forced, 0
	}
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var e struct {
			Event    string  `json:"event"`
			Seq      float64 `json:"seq"`
			Reason   string  `json:"reason"`
			Relogged bool    `json:"relogged"`
		}
		if json.Unmarshal(sc.Bytes(), &e) != nil {
			continue // a line torn by a kill mid-write is not a logged event
		}
		if e.Seq > 0 {
			seqs[int(e.Seq)] = true
		}
		if e.Event == "graph.forced" {
			forced[e.Reason] = true
		}
		if e.Relogged {
			relogged++
		}
	}
	return seqs, forced, relogged
}
