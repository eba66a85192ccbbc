package main

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
)

// The forgery suite of issue 9: every forgery an attacker with write access
// to the agent's checkout can make, tried through the built binaries — the
// CI gate (`loopctl check --recompute --fail-on block`) and the Stop hook
// (`loop-gate`) — with and without a trust anchor.

var (
	builtOnce                 sync.Once
	loopctlBin, loopGateBin   string
	builtErr                  error
	builtDir                  string
	forgeryHarness            = "ticketing:\n  github: {owner: acme, repo: widgets}\n"
	forgeryRequirements       = "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nA trust boundary: input.\n"
	unverifiedWarningFragment = "decisions are NOT verified"
)

// TestMain removes the binaries builtBinaries made, which would otherwise
// stay in $TMPDIR after every run (~30 MB each time).
func TestMain(m *testing.M) {
	code := m.Run()
	if builtDir != "" {
		_ = os.RemoveAll(builtDir)
	}
	os.Exit(code)
}

func builtBinaries(t *testing.T) (string, string) {
	t.Helper()
	builtOnce.Do(func() {
		dir, err := os.MkdirTemp("", "theloop-forgery-")
		if err != nil {
			builtErr = err
			return
		}
		builtDir = dir
		loopctlBin = filepath.Join(dir, "loopctl")
		loopGateBin = filepath.Join(dir, "loop-gate")
		for bin, pkg := range map[string]string{loopctlBin: ".", loopGateBin: "../loop-gate"} {
			if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
				builtErr = fmt.Errorf("go build %s: %v\n%s", pkg, err, out)
				return
			}
		}
	})
	if builtErr != nil {
		t.Skipf("cannot build the binaries: %v", builtErr)
	}
	return loopctlBin, loopGateBin
}

type procResult struct {
	code           int
	stdout, stderr string
}

func runBin(t *testing.T, bin, dir string, env []string, stdin []byte, args ...string) procResult {
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
	return procResult{code, out.String(), errOut.String()}
}

type checkJSON struct {
	CurrentNode string             `json:"currentNode"`
	Nodes       []graph.NodeReport `json:"nodes"`
}

func (c checkJSON) node(id string) graph.NodeReport {
	for _, n := range c.Nodes {
		if n.Node == id {
			return n
		}
	}
	return graph.NodeReport{}
}

func ciCheck(t *testing.T, repo, id string, env []string, extra ...string) (checkJSON, procResult) {
	t.Helper()
	ctl, _ := builtBinaries(t)
	args := append([]string{"check", id, "--recompute", "--fail-on", "block", "--format", "json", "--repo", repo}, extra...)
	r := runBin(t, ctl, repo, env, nil, args...)
	var rep checkJSON
	require.NoError(t, json.Unmarshal([]byte(r.stdout), &rep), "stdout %q stderr %q", r.stdout, r.stderr)
	return rep, r
}

func stopHook(t *testing.T, repo, id string, env []string) procResult {
	t.Helper()
	_, gate := builtBinaries(t)
	payload := fmt.Appendf(nil, `{"session_id":"s1","cwd":%q,"hook_event_name":"Stop","stop_hook_active":false}`, repo)
	return runBin(t, gate, repo, append(env, "THE_LOOP_WORK_ITEM="+id), payload, "claude")
}

// signedCheckout is a repository whose issue-42 passed requirements-approval
// on the daemon's path: the decision signed by signer.
func signedCheckout(t *testing.T) (string, *loop.Signer) {
	t.Helper()
	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	writeTestFile(t, repo, ".the-loop/harness-config.yaml", forgeryHarness)
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := loop.NewSigner(priv)
	tickets := graphtest.NewTickets()
	ref := "github:acme/widgets#42"
	rt, err := loop.Open(repo, loop.Options{Integrations: tickets, AuthorizedUsers: []string{"dana"}, DecisionSigner: signer})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-42")
	require.NoError(t, err)
	_, err = rt.Advance(ctx, "issue-42", &graph.Event{ID: "d1", Comments: []graph.Comment{tickets.Comment(ref, "dana", "the-loop execute\n- [ ] brainstorming")}})
	require.NoError(t, err)
	writeTestFile(t, repo, "docs/specs/issue-42/requirements.md", forgeryRequirements)
	_, err = rt.Complete(ctx, "issue-42", "", "agent")
	require.NoError(t, err)
	step, err := rt.Advance(ctx, "issue-42", &graph.Event{ID: "d2", Comments: []graph.Comment{tickets.Comment(ref, "dana", "Approved")}})
	require.NoError(t, err)
	require.Equal(t, "design", step.CurrentNode)
	return repo, signer
}

func writeTestFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func editStateJSON(t *testing.T, repo, id string, f func(m map[string]any)) {
	t.Helper()
	p := filepath.Join(repo, "docs/specs", id, "graph-state.json")
	data, err := os.ReadFile(p)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	f(m)
	out, err := json.Marshal(m)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(p, out, 0o644))
}

func gateDecision(m map[string]any, gate string) map[string]any {
	return m["decisions"].(map[string]any)[gate].(map[string]any)
}

// The first reproduction: a hand-written graph-state.json in an
// empty checkout.
func TestForgeryHandWrittenStateInAnEmptyCheckout(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	writeTestFile(t, repo, "docs/specs/issue-7/graph-state.json", `{"version":1,"workItem":"issue-7","currentNode":"phase-selection","decisions":{"phase-selection":{"outcome":"selected"}}}`)
	_, priv, _ := ed25519.GenerateKey(nil)
	anchor := []string{loop.TrustKeysEnv + "=" + loop.FormatPublicKey(priv.Public().(ed25519.PublicKey))}

	// Without an anchor: the-loop's behaviour (the forged decision is
	// honoured) and one warning line.
	rep, r := ciCheck(t, repo, "issue-7", nil)
	require.NotEqual(t, "phase-selection", rep.CurrentNode)
	require.Equal(t, 1, strings.Count(r.stderr, unverifiedWarningFragment), r.stderr)

	// With one: refused, and CI fails.
	rep, r = ciCheck(t, repo, "issue-7", anchor)
	require.Equal(t, "phase-selection", rep.CurrentNode)
	require.Equal(t, 1, r.code, "--fail-on block fails on a refused decision")
	require.Contains(t, strings.Join(rep.node("phase-selection").Messages, "\n"), "carries no signature")
	require.NotContains(t, r.stderr, unverifiedWarningFragment)
}

func TestForgerySuiteThroughTheBinaries(t *testing.T) {
	_, other, _ := ed25519.GenerateKey(nil)
	otherKey := loop.FormatPublicKey(other.Public().(ed25519.PublicKey))
	for _, tc := range []struct {
		name  string
		forge func(t *testing.T, repo string) (id string)
		// trust overrides the anchor (default: the signer's key).
		trust string
		want  string
		// gate is where the walk stops (default requirements-approval):
		// a copied state or an untrusted key loses phase selection too.
		gate string
	}{
		{"unsigned", func(t *testing.T, repo string) string {
			editStateJSON(t, repo, "issue-42", func(m map[string]any) { delete(gateDecision(m, "requirements-approval"), "signature") })
			return "issue-42"
		}, "", "carries no signature", ""},
		{"mis-signed", func(t *testing.T, repo string) string {
			editStateJSON(t, repo, "issue-42", func(m map[string]any) { gateDecision(m, "requirements-approval")["by"] = "@mallory" })
			return "issue-42"
		}, "", "does not match its signature", ""},
		{"replayed from another item", func(t *testing.T, repo string) string {
			data, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-42/graph-state.json"))
			require.NoError(t, err)
			writeTestFile(t, repo, "docs/specs/issue-43/graph-state.json", string(data))
			editStateJSON(t, repo, "issue-43", func(m map[string]any) { m["workItem"] = "issue-43" })
			req, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-42/requirements.md"))
			require.NoError(t, err)
			writeTestFile(t, repo, "docs/specs/issue-43/requirements.md", string(req))
			return "issue-43"
		}, "", "was signed for work item issue-42", "phase-selection"},
		{"stale", func(t *testing.T, repo string) string {
			p := filepath.Join(repo, "docs/specs/issue-42/requirements.md")
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, append(data, "\n2. slipped in after approval\n"...), 0o644))
			return "issue-42"
		}, "", "docs/specs/issue-42/requirements.md changed after it was approved", ""},
		{"unknown key", func(t *testing.T, repo string) string { return "issue-42" }, otherKey, "not one of the 1 trusted key(s)", "phase-selection"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, signer := signedCheckout(t)
			trust := signer.PublicKey()
			if tc.trust != "" {
				trust = tc.trust
			}
			anchor := []string{loop.TrustKeysEnv + "=" + trust}

			// Before the forgery the genuine decision counts.
			if tc.trust == "" {
				rep, _ := ciCheck(t, repo, "issue-42", anchor)
				require.Equal(t, "design", rep.CurrentNode)
			}
			id := tc.forge(t, repo)

			gate := tc.gate
			if gate == "" {
				gate = "requirements-approval"
			}
			rep, r := ciCheck(t, repo, id, anchor)
			require.Equal(t, gate, rep.CurrentNode, r.stderr)
			require.Equal(t, graph.StatusBlock, rep.node(gate).Status)
			require.Contains(t, strings.Join(rep.node(gate).Messages, "\n"), tc.want)
			require.Equal(t, 1, r.code)

			// The same through the flag.
			rep, _ = ciCheck(t, repo, id, nil, "--trust-key", trust)
			require.Equal(t, gate, rep.CurrentNode)

			// The Stop hook keeps the agent at the gate and says why.
			g := stopHook(t, repo, id, anchor)
			require.Equal(t, 0, g.code, g.stderr)
			require.Contains(t, g.stdout, `"decision":"block"`)
			require.Contains(t, g.stdout, gate)
			require.Contains(t, g.stdout, tc.want)

			// verify-decisions names the verdict.
			ctl, _ := builtBinaries(t)
			v := runBin(t, ctl, repo, anchor, nil, "verify-decisions", id, "--repo", repo)
			require.Equal(t, 1, v.code, v.stdout+v.stderr)
			require.Contains(t, v.stdout, "refused")

			// Without an anchor: the-loop's behaviour, with the warning.
			rep, r = ciCheck(t, repo, id, nil)
			require.Equal(t, "design", rep.CurrentNode)
			require.Equal(t, 1, strings.Count(r.stderr, unverifiedWarningFragment))
			g = stopHook(t, repo, id, nil)
			require.Equal(t, 0, g.code)
			require.Contains(t, g.stderr, unverifiedWarningFragment)
		})
	}
}

// The trust anchor on the base branch: the working tree's copy of
// .the-loop/trusted-keys is the agent's to change, and is not read.
func TestTrustAnchorFromTheBaseBranch(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	repo, signer := signedCheckout(t)
	require.NoError(t, os.Remove(filepath.Join(repo, ".git")))
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", repo, "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	git("init", "-q", "-b", "main")
	writeTestFile(t, repo, loop.TrustedKeysFile, "# theloop daemon\n"+signer.PublicKey()+" daemon\n")
	git("add", "-A")
	git("commit", "-q", "-m", "trust the daemon")
	git("checkout", "-q", "-b", "agent-branch")

	rep, r := ciCheck(t, repo, "issue-42", nil, "--trust-base", "main")
	require.Equal(t, "design", rep.CurrentNode, r.stderr)

	// The agent signs its own approval and trusts its key in the working
	// tree (even committed on its branch): refused.
	_, mallory, _ := ed25519.GenerateKey(nil)
	ms := loop.NewSigner(mallory)
	st, err := loop.NewStore(repo, "").Load(context.Background(), "issue-42")
	require.NoError(t, err)
	d, _ := st.Decisions.Get("requirements-approval")
	arts := loop.NewFileArtifacts(filepath.Join(repo, "docs/specs/issue-42"), "docs/specs/issue-42")
	require.NoError(t, ms.SignDecision(context.Background(), d.Signature.Subject, arts, []string{"requirements.md"}, &d))
	st.Decisions.Set("requirements-approval", d)
	require.NoError(t, loop.NewStore(repo, "").Save(context.Background(), "issue-42", st))
	writeTestFile(t, repo, loop.TrustedKeysFile, ms.PublicKey()+"\n")
	git("commit", "-q", "-am", "trust me")

	rep, r = ciCheck(t, repo, "issue-42", nil, "--trust-base", "main")
	require.Equal(t, "requirements-approval", rep.CurrentNode, r.stderr)
	require.Contains(t, strings.Join(rep.node("requirements-approval").Messages, "\n"), "not one of the 1 trusted key(s) from .the-loop/trusted-keys on main")
	rep, _ = ciCheck(t, repo, "issue-42", []string{loop.TrustBaseEnv + "=main"})
	require.Equal(t, "requirements-approval", rep.CurrentNode)

	// A base that does not exist fails closed.
	_, r = ciCheck2(t, repo, "issue-42", "--trust-base", "no-such-branch")
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "trust anchor cannot be used")
}

func ciCheck2(t *testing.T, repo, id string, extra ...string) (string, procResult) {
	ctl, _ := builtBinaries(t)
	r := runBin(t, ctl, repo, nil, nil, append([]string{"check", id, "--recompute", "--repo", repo}, extra...)...)
	return r.stdout, r
}

func TestKeysInitAndShow(t *testing.T) {
	ctl, _ := builtBinaries(t)
	state := filepath.Join(t.TempDir(), "state")
	r := runBin(t, ctl, t.TempDir(), nil, nil, "keys", "init", "--state-root", state)
	require.Equal(t, 0, r.code, r.stderr)
	pub := strings.TrimSpace(r.stdout)
	require.True(t, strings.HasPrefix(pub, loop.KeyPrefix))
	info, err := os.Stat(loop.SigningKeyPath(state))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	r = runBin(t, ctl, t.TempDir(), nil, nil, "keys", "show", "--state-root", state, "--format", "env")
	require.Equal(t, loop.TrustKeysEnv+"="+pub+"\n", r.stdout)
	r = runBin(t, ctl, t.TempDir(), []string{"THE_LOOP_STATE_ROOT=" + state}, nil, "keys", "show")
	require.Equal(t, pub+"\n", r.stdout)

	// Never in a repository.
	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	r = runBin(t, ctl, repo, nil, nil, "keys", "init", "--state-root", filepath.Join(repo, ".the-loop"))
	require.Equal(t, 1, r.code)
	require.Contains(t, r.stderr, "inside the git checkout")
}

// A hand-written `status: approved` lock never passes a gate, with or
// without a trust anchor: only a recorded decision does.
func TestForgeryHandWrittenLock(t *testing.T) {
	repo, signer := signedCheckout(t)
	editStateJSON(t, repo, "issue-42", func(m map[string]any) {
		delete(m["decisions"].(map[string]any), "requirements-approval")
	})
	lock := "---\nstatus: approved\napprovedBy: [\"@dana\"]\ndecision: \"requirements-approval/99\"\n---\n" + forgeryRequirements
	// A lock with no review under it is caught at the producing node (R5.2).
	writeTestFile(t, repo, "docs/specs/issue-42/requirements.md", lock)
	rep, r := ciCheck(t, repo, "issue-42", nil)
	require.Equal(t, "requirements-definition", rep.CurrentNode, r.stderr)
	require.Contains(t, strings.Join(rep.node("requirements-definition").Messages, "\n"), "passed its gate but has no ## Review comments")
	// A forged review as well: the gate itself still waits for a decision.
	writeTestFile(t, repo, "docs/specs/issue-42/requirements.md", lock+"\n## Review comments\n\n### 2026-01-01 — approved\n\n**@dana** wrote:\n\nlgtm\n")
	for _, env := range [][]string{nil, {loop.TrustKeysEnv + "=" + signer.PublicKey()}} {
		rep, r := ciCheck(t, repo, "issue-42", env)
		require.Equal(t, "requirements-approval", rep.CurrentNode, r.stderr)
		require.Equal(t, graph.StatusWait, rep.node("requirements-approval").Status)
	}
}

// graph complete verifies too: a forged decision does not move the pointer.
func TestForgeryThroughGraphComplete(t *testing.T) {
	ctl, _ := builtBinaries(t)
	_, priv, _ := ed25519.GenerateKey(nil)
	key := loop.FormatPublicKey(priv.Public().(ed25519.PublicKey))
	for _, anchored := range []bool{true, false} {
		repo := t.TempDir()
		require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
		writeTestFile(t, repo, "docs/specs/issue-7/graph-state.json", `{"version":1,"workItem":"issue-7","currentNode":"phase-selection","decisions":{"phase-selection":{"outcome":"selected"}}}`)
		args := []string{"graph", "complete", "issue-7", "--repo", repo}
		if anchored {
			args = append(args, "--trust-key", key)
		}
		r := runBin(t, ctl, repo, nil, nil, args...)
		var claim graph.Claim
		require.NoError(t, json.Unmarshal([]byte(r.stdout), &claim), r.stdout+r.stderr)
		if anchored {
			require.False(t, claim.Moved)
			require.Equal(t, "phase-selection", claim.CurrentNode)
			require.Contains(t, strings.Join(claim.Messages, "\n"), "carries no signature")
			require.NotContains(t, r.stderr, unverifiedWarningFragment)
		} else {
			require.True(t, claim.Moved, "the-loop's behaviour without an anchor")
			require.Equal(t, 1, strings.Count(r.stderr, unverifiedWarningFragment))
		}
	}
}

func TestVerifyDecisionsListsDecisionsAndLocks(t *testing.T) {
	ctl, _ := builtBinaries(t)
	repo, signer := signedCheckout(t)
	writeTestFile(t, repo, "docs/specs/issue-42/design.md", "---\nstatus: approved\n---\n# D\n")
	r := runBin(t, ctl, repo, nil, nil, "verify-decisions", "issue-42", "--repo", repo, "--trust-key", signer.PublicKey())
	require.Equal(t, 0, r.code, r.stdout+r.stderr)
	t.Log("\n" + r.stdout)
	for _, want := range []string{"phase-selection", "requirements-approval", "verified", "signed by " + signer.PublicKey(), "requirements.md sha256", "2 decision(s), 0 refused",
		"docs/specs/issue-42/requirements.md", "docs/specs/issue-42/design.md", "names no decision: the lock alone passes nothing"} {
		require.Contains(t, r.stdout, want)
	}
	r = runBin(t, ctl, repo, nil, nil, "verify-decisions", "issue-42", "--repo", repo)
	require.Equal(t, 0, r.code)
	require.Contains(t, r.stdout, "unverified")
	require.Contains(t, r.stderr, unverifiedWarningFragment)
}
