package demo_test

import (
	"bytes"
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/shortdir"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
	"github.com/theloop-dev/theloop/loop/demo"
	demoagent "github.com/theloop-dev/theloop/loop/demo/agent"
)

// The test binary doubles as the scripted agent: the demo's `claude`
// wrapper runs it as `<test binary> demo agent --config FILE --session-id
// ID`, as loopd's runs `loopd demo agent …`.
func TestMain(m *testing.M) {
	sandbox.MaybeRunLauncher() // and as the sandbox launcher, as loopd is
	_ = sandbox.Harden()       // and hardened as loopd's main hardens it
	if len(os.Args) > 2 && os.Args[1] == "demo" && os.Args[2] == "agent" {
		fs := flag.NewFlagSet("agent", flag.ContinueOnError)
		config := fs.String("config", "", "")
		pid := fs.Int("demo-pid", 0, "")
		attack := fs.String("attack", "", "")
		fs.String("session-id", "", "")
		fs.String("resume", "", "")
		if err := fs.Parse(os.Args[3:]); err != nil {
			os.Exit(2)
		}
		if err := demoagent.Run(context.Background(), demoagent.Options{ConfigPath: *config, AttackBrief: *attack, DemoPID: *pid}); err != nil {
			fmt.Fprintln(os.Stderr, "scripted agent:", err)
			time.Sleep(2 * time.Second)
			os.Exit(1)
		}
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func requireTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"tmux", "git"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed: loopd demo needs the real %s", tool, tool)
		}
	}
}

// syncBuffer is a bytes.Buffer safe for the demo's concurrent printing.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func options(t *testing.T, out *syncBuffer) demo.Options {
	exe, err := os.Executable()
	require.NoError(t, err)
	token := demo.RandomSecret()
	return demo.Options{Out: out, AgentArgv: []string{exe, "demo", "agent"}, Token: token, TempDir: shortdir.New(t), StepTimeout: 90 * time.Second}
}

// TestDemoWalksToCompleteWithYes runs the whole demo — real daemon, real
// tmux, real git, the scripted agent — answering the gates with --yes, and
// checks that the work item reached the state the demo claims.
func TestDemoWalksToCompleteWithYes(t *testing.T) {
	requireTools(t)
	var out syncBuffer
	opts := options(t, &out)
	opts.Yes, opts.Keep = true, true
	res, err := demo.Run(context.Background(), opts)
	require.NoError(t, err, out.String())
	t.Cleanup(func() { _ = os.RemoveAll(res.Dir) })

	require.True(t, res.Complete, out.String())
	require.Equal(t, "complete", res.Node)
	require.Equal(t, []string{"requirements-approval", "design-approval", "human-approval"}, res.Gates)
	require.Contains(t, res.Labels, "loop:complete")
	require.Contains(t, res.Labels, demo.Label)
	require.Positive(t, res.Comments)
	require.Positive(t, res.Pastes)
	require.Positive(t, res.Webhooks)
	require.True(t, res.IgnoredStranger, "an unauthorized Approved passed no gate")
	require.NotEmpty(t, res.Redelivered)
	requireSelfApprovalRefused(t, res, out.String())
	require.Equal(t, 4, res.SignedDecisions, "the phase selection and each approval are signed decisions")
	// docs/decisions.md §21: the closing check is the README's CI line with the
	// daemon's key as trust anchor, and it passes.
	require.True(t, res.Trusted, out.String())
	require.Equal(t, "loopctl check issue-1 --recompute --fail-on block --trust-key "+res.TrustKey, res.TrustedCheck)
	require.Contains(t, out.String(), "$ "+res.TrustedCheck+"\n")
	require.Contains(t, out.String(), "  passed: at \"complete\", no node blocks")
	// The agent's claims reached the ticket through loopd's outbox (the
	// session needs no credential for them), none refused.
	require.NotEmpty(t, res.OutboxLatencies, out.String())
	require.Zero(t, res.OutboxRefused, out.String())
	lat := slices.Clone(res.OutboxLatencies)
	slices.Sort(lat)
	t.Logf("claim → ticket through the outbox: %d effects, p50 %v, p99 %v, max %v", len(lat), lat[len(lat)/2], lat[min(len(lat)-1, len(lat)*99/100)], lat[len(lat)-1])

	// What the demo claims is what the repository says: the worktree's
	// graph state, recomputed from the artifacts by the runtime CI uses.
	rt, err := loop.Open(res.Checkout, loop.Options{WorkItem: demo.WorkItem})
	require.NoError(t, err)
	rep, err := rt.Status(context.Background(), demo.WorkItem, true)
	require.NoError(t, err)
	require.True(t, rep.OK, "%+v", rep)
	require.Equal(t, "complete", rep.CurrentNode)
	req, err := os.ReadFile(filepath.Join(res.Checkout, "docs", "specs", demo.WorkItem, "requirements.md"))
	require.NoError(t, err)
	require.Contains(t, string(req), "status: approved", "the gate locked the approved artifact")
	log, err := exec.Command("git", "-C", res.Checkout, "log", "--oneline").Output()
	require.NoError(t, err)
	require.Contains(t, string(log), "docs(issue-1): writes requirements.md", "the agent committed its work in the worktree")

	// The narration shows each kind of thing the demo promises.
	s := out.String()
	for _, want := range []string{
		"webhook  issues.labeled \"the-loop: auto-execute\" by dana → loopd answered 202",
		"paste    → tmux loop-github-demo-widgets-1: spawn-prompt",
		"paste    → tmux loop-github-demo-widgets-1: graph.assignment",
		"comment  theloop → #1:",
		"graph    requirements-definition: blocked by validate-artifacts (agent's claim)",
		"outbox   loopd performed label loop:",
		"graph    requirements-definition: pass → requirements-approval (loopd's recompute)",
		"graph    requirements-approval: approved → design (daemon)",
		"━━ human gate: requirements-approval",
		"Approve as dana? [y/N] y (--yes)",
		"webhook  issue_comment.created by mallory → loopd answered 202, not queued: unauthorized-actor",
		"issue #1 is still at requirements-approval: an unauthorized comment passes no gate",
		"webhook  issue_comment.created by dana → loopd answered 202, not queued: duplicate-delivery",
		"not queued: self-authored",
		res.Attach,
		"done: issue #1 walked the whole loop",
	} {
		require.Contains(t, s, want)
	}
	if sandbox.CheckNamespaces() == nil {
		// The session had a world of its own: its server's socket is in the
		// world, and the operator's client runs boxed (the agent's server can
		// make a client run a command).
		require.True(t, strings.HasPrefix(res.Attach, "bwrap "), "the attach command runs tmux in a box: %s", res.Attach)
		f := strings.Fields(res.Attach)
		i := slices.Index(f, "-S")
		require.Positive(t, i, res.Attach)
		_, err := os.Stat(f[i+1])
		require.True(t, os.IsNotExist(err), "the world's tmux server must be gone with its socket: %s", f[i+1])
		return
	}
	require.True(t, strings.HasPrefix(res.Attach, "tmux -L theloop-demo-"), "a private tmux server, never the user's: %s", res.Attach)

	// Cleaned up: the private tmux server is gone.
	socket := strings.Fields(res.Attach)[2]
	require.Error(t, exec.Command("tmux", "-L", socket, "has-session").Run(), "the demo's tmux server must be killed")
}

// requireSelfApprovalRefused: at the first gate the sandboxed agent tried
// to approve its own work four ways, each was refused, the demo printed
// the block, and the gate did not move (the walk then went on with dana's
// approval, which the caller checks).
func requireSelfApprovalRefused(t *testing.T, res *demo.Result, out string) {
	t.Helper()
	if !sandbox.Available() {
		t.Log("no Landlock here: the agent ran unconfined; the attack is shown, not asserted refused")
		return
	}
	steps := map[string]string{}
	for _, a := range res.SelfApproval {
		require.True(t, a.Refused, "%+v\n%s", a, out)
		steps[a.Step] = a.Outcome
	}
	if sandbox.CheckNamespaces() == nil {
		// In its own world loopd's files, socket and ports are not there.
		require.Contains(t, steps[demoagent.StepKey], "no such file", out)
		require.Contains(t, steps[demoagent.StepWebhook], "refused", out)
		require.Contains(t, steps[demoagent.StepSocket], "no such file", out)
		require.Contains(t, steps[demoagent.StepEnviron], "no secrets", out)
		require.True(t, res.SelfApprovalRefused, out)
		require.Contains(t, out, "Nothing moved: issue #1 is still at requirements-approval", out)
		return
	}
	require.Equal(t, "permission denied", steps[demoagent.StepKey], out)
	require.Equal(t, "401 Unauthorized (no secret)", steps[demoagent.StepWebhook], out)
	require.Equal(t, "403 Forbidden", steps[demoagent.StepSocket], out)
	require.Contains(t, steps[demoagent.StepEnviron], "no secrets", out)
	require.True(t, res.SelfApprovalRefused, out)
	for _, want := range []string{
		"agent    tries to approve its own work at requirements-approval",
		"(THE_LOOP_GH_WEBHOOK_SECRET is not in its environment: it signed with a guess)",
		"━━ the agent tried to approve its own work: key → permission denied; webhook → 401 Unauthorized (no secret); operator socket → 403 Forbidden; loopd's environment → ",
		". Nothing moved: issue #1 is still at requirements-approval.",
	} {
		require.Contains(t, out, want)
	}
	// Dana's approval came after the attempt and is what moved the gate.
	require.Less(t, strings.Index(out, "Nothing moved: issue #1 is still at requirements-approval"), strings.Index(out, "graph    requirements-approval: approved → design (daemon)"), out)
}

// TestDemoAsksAtEachGate answers from the terminal: "y" at the first gate,
// "n" at the second, where the work item then waits.
func TestDemoAsksAtEachGate(t *testing.T) {
	requireTools(t)
	var out syncBuffer
	opts := options(t, &out)
	opts.In = strings.NewReader("y\nn\n")
	res, err := demo.Run(context.Background(), opts)
	require.ErrorIs(t, err, demo.ErrNotApproved, out.String())
	require.Equal(t, []string{"requirements-approval"}, res.Gates)
	require.Equal(t, "design-approval", res.Node)
	require.Equal(t, 2, strings.Count(out.String(), "Approve as dana? [y/N] "))
	require.Contains(t, out.String(), "Not approved: issue #1 waits at design-approval")
	_, statErr := os.Stat(res.Dir)
	require.True(t, os.IsNotExist(statErr), "without --keep the directory is removed")
}

// TestDemoWithoutTerminalTakesNo: with nobody to answer (`loopd demo <
// /dev/null`), the first gate is not approved, the demo says why and how to
// approve, and it ends instead of waiting.
func TestDemoWithoutTerminalTakesNo(t *testing.T) {
	requireTools(t)
	var out syncBuffer
	opts := options(t, &out)
	opts.In = strings.NewReader("")
	res, err := demo.Run(context.Background(), opts)
	require.ErrorIs(t, err, demo.ErrNotApproved, out.String())
	require.Empty(t, res.Gates)
	require.Equal(t, "requirements-approval", res.Node)
	require.Contains(t, out.String(), "Approve as dana? [y/N] (no answer: the input ended — taken as no; `loopd demo --yes` approves every gate)")
	require.Contains(t, out.String(), "Run `loopd demo --yes` to see the rest of the loop.")
}

func TestDemoNeedsTmuxAndGit(t *testing.T) {
	opts := options(t, &syncBuffer{})
	opts.Path = t.TempDir() // neither tmux nor git
	_, err := demo.Run(context.Background(), opts)
	require.ErrorIs(t, err, demo.ErrMissingTool)
	require.ErrorContains(t, err, "tmux is not on PATH")
}
