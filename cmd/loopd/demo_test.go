package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// TestDemoBinaryWalksToComplete runs `loopd demo --yes --keep` as a user
// does — the built binary, which re-executes itself as the scripted agent
// in tmux — and checks the work item reached the state the demo claims.
func TestDemoBinaryWalksToComplete(t *testing.T) {
	for _, tool := range []string{"tmux", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: loopd demo needs the real %s", tool, tool)
		}
	}
	bin := loopdBinary(t)
	// The demo keeps its state (and control socket) under $TMPDIR: a short one.
	tmp := shortdir.New(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "demo", "--yes", "--keep")
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "TMPDIR="+tmp, "HOME="+home)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	s := string(out)
	// Nothing of the demo's outside its own directory: no harness dirs in
	// HOME, no shared agent temp dir in TMPDIR.
	left, err := os.ReadDir(home)
	require.NoError(t, err)
	require.Empty(t, left, "the demo creates nothing in HOME")
	inTmp, err := os.ReadDir(tmp)
	require.NoError(t, err)
	for _, e := range inTmp {
		require.True(t, strings.HasPrefix(e.Name(), "theloop-demo-"), "the demo leaves %s in TMPDIR", e.Name())
	}
	require.Contains(t, s, "done: issue #1 walked the whole loop — it is at \"complete\"")
	if strings.Contains(s, "the agent runs in a world of its own") {
		require.Regexp(t, `watch the agent work:  bwrap .* tmux -S \S+ attach -t =loop-github-demo-widgets-1`, s)
	} else {
		require.Regexp(t, `watch the agent work:  tmux -L theloop-demo-\d+-[0-9a-f]{4} attach -t loop-github-demo-widgets-1`, s)
	}
	require.Contains(t, s, "webhook  issues.labeled \"the-loop: auto-execute\" by dana → loopd answered 202")
	require.Contains(t, s, "(agent's claim)", "the scripted agent's claims were made")
	// The agent runs sandboxed and, at the first gate, fails to approve its
	// own work every way it tries; dana's approval moves the gate after.
	if sandbox.Available() {
		// In a world of its own, loopd's key, socket and port are not there;
		// under Landlock alone they are there and refuse it.
		want := `key → permission denied; webhook → 401 Unauthorized \(no secret\); operator socket → 403 Forbidden`
		if sandbox.CheckNamespaces() == nil {
			require.Contains(t, s, "the agent runs in a world of its own")
			want = `key → no such file; webhook → connection refused; operator socket → no such file`
		} else {
			require.Contains(t, s, "the agent runs DEGRADED, under Landlock")
		}
		attack := regexp.MustCompile(`(?m)^━━ the agent tried to approve its own work: ` + want + `; loopd's environment → [^;]*no secrets\. Nothing moved: issue #1 is still at requirements-approval\.$`).FindStringIndex(s)
		require.NotNil(t, attack, "the attack block:\n%s", s)
		if sandbox.CheckNamespaces() != nil {
			require.Contains(t, s, "(THE_LOOP_GH_WEBHOOK_SECRET is not in its environment: it signed with a guess)")
		}
		approved := strings.Index(s, "graph    requirements-approval: approved → design (daemon)")
		require.Greater(t, approved, attack[1], "the gate moved only with dana's approval, after the attack")
	}
	// The closing check is the README's CI line trusting the daemon's key
	// (docs/decisions.md §21), and it passes.
	trusted := regexp.MustCompile(`(?m)^\$ loopctl check issue-1 --recompute --fail-on block --trust-key (ed25519:\S+)\n.*\n  passed: at "complete", no node blocks`).FindStringSubmatch(s)
	require.NotNil(t, trusted, "the demo ends with the trusted check, passing:\n%s", s)

	m := regexp.MustCompile(`(?m)^kept: (\S+) `).FindStringSubmatch(s)
	require.NotNil(t, m, "--keep names the directory:\n%s", s)
	dir := m[1]
	require.True(t, strings.HasPrefix(dir, tmp), "the demo works under TMPDIR: %s", dir)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	var found string
	_ = filepath.WalkDir(filepath.Join(dir, "workspaces"), func(p string, d os.DirEntry, err error) error {
		if err == nil && d.Name() == "graph-state.json" && filepath.Base(filepath.Dir(p)) == "issue-1" {
			found = p
		}
		return nil
	})
	require.NotEmpty(t, found, "the worktree's graph state")
	b, err := os.ReadFile(found)
	require.NoError(t, err)
	var st struct {
		CurrentNode string `json:"currentNode"`
	}
	require.NoError(t, json.Unmarshal(b, &st))
	require.Equal(t, "complete", st.CurrentNode)

	// The same check, made here from the kept worktree and the printed key
	// alone: the key is the daemon's (under the kept state root), and every
	// gate decision verifies against it.
	signer, err := loop.LoadSigningKey(filepath.Join(dir, "state"))
	require.NoError(t, err)
	require.Equal(t, signer.PublicKey(), trusted[1], "the printed trust anchor is the daemon's key")
	v, err := loop.LoadVerifier(ctx, loop.TrustSource{Keys: []string{trusted[1]}})
	require.NoError(t, err)
	checkout := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(found))))
	rt, err := loop.Open(checkout, loop.Options{WorkItem: "issue-1", DecisionVerifier: v})
	require.NoError(t, err)
	rep, err := rt.Status(ctx, "issue-1", true)
	require.NoError(t, err)
	require.Equal(t, "complete", rep.CurrentNode)
	for _, n := range rep.Nodes {
		require.NotEqual(t, graph.StatusBlock, n.Status, "%s: %v", n.Node, n.Messages)
	}

	if m := regexp.MustCompile(`tmux -S (\S+) attach`).FindStringSubmatch(s); m != nil {
		// The world's server: gone with its socket.
		_, err := os.Stat(m[1])
		require.True(t, os.IsNotExist(err), "the world's tmux server is gone with its socket: %s", m[1])
		return
	}
	sock := regexp.MustCompile(`tmux -L (theloop-demo-\d+-[0-9a-f]{4})`).FindStringSubmatch(s)[1]
	require.Error(t, exec.Command("tmux", "-L", sock, "has-session").Run(), "the demo's private tmux server is killed")
}

func TestDemoWithoutTmuxExits2(t *testing.T) {
	e, _, errb := testEnv(t, map[string]string{"PATH": t.TempDir()})
	code := Main([]string{"loopd", "demo", "--yes"}, e)
	require.Equal(t, exitRefused, code)
	require.Contains(t, errb.String(), "tmux is not on PATH")
}

func TestDemoAgentIsHidden(t *testing.T) {
	e, out, _ := testEnv(t, nil)
	require.Equal(t, exitOK, Main([]string{"loopd", "demo", "--help"}, e))
	require.Contains(t, out.String(), "--yes")
	_, cmds, _ := strings.Cut(out.String(), "COMMANDS:")
	require.NotContains(t, cmds, "agent", "the scripted agent's verb is not advertised")
}
