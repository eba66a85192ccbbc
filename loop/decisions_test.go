package loop_test

import (
	"context"
	"crypto/ed25519"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
)

// signedRepo walks issue-42 past requirements-approval with a signing
// runtime (the daemon's path) and returns the repository and the signer.
func signedRepo(t testing.TB) (string, *loop.Signer) {
	return signedRepoAt(t, true)
}

// signedRepoAt stops at requirements-approval unless approve.
func signedRepoAt(t testing.TB, approve bool) (string, *loop.Signer) {
	t.Helper()
	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/harness-config.yaml", harnessConfig)
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := loop.NewSigner(priv)
	tickets := graphtest.NewTickets()
	ref := "github:acme/widgets#42"
	rt, err := loop.Open(repo, loop.Options{Integrations: tickets, AuthorizedUsers: []string{"dana"}, DecisionSigner: signer,
		Clock: graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC))})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-42")
	require.NoError(t, err)
	c := tickets.Comment(ref, "dana", "the-loop execute\n- [ ] brainstorming")
	c.URL = "https://github.com/acme/widgets/issues/42#issuecomment-" + c.ID
	step, err := rt.Advance(ctx, "issue-42", &graph.Event{ID: "d1", Comments: []graph.Comment{c}})
	require.NoError(t, err)
	require.Equal(t, "requirements-definition", step.CurrentNode)
	writeFile(t, repo, "docs/specs/issue-42/requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nA trust boundary: input.\n")
	claim, err := rt.Complete(ctx, "issue-42", "", "agent")
	require.NoError(t, err)
	require.Equal(t, "requirements-approval", claim.CurrentNode)
	if !approve {
		return repo, signer
	}
	c = tickets.Comment(ref, "dana", "Approved")
	c.URL = "https://github.com/acme/widgets/issues/42#issuecomment-" + c.ID
	step, err = rt.Advance(ctx, "issue-42", &graph.Event{ID: "d2", Comments: []graph.Comment{c}})
	require.NoError(t, err)
	require.Equal(t, "design", step.CurrentNode)
	return repo, signer
}

func statePath(repo, id string) string {
	return filepath.Join(repo, "docs", "specs", id, "graph-state.json")
}

// editState applies f to the raw JSON of a work item's state.
func editState(t *testing.T, repo, id string, f func(m map[string]any)) {
	t.Helper()
	data, err := os.ReadFile(statePath(repo, id))
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	f(m)
	out, err := json.MarshalIndent(m, "", "  ")
	require.NoError(t, err)
	require.NoError(t, os.MkdirAll(filepath.Dir(statePath(repo, id)), 0o755))
	require.NoError(t, os.WriteFile(statePath(repo, id), out, 0o644))
}

func decisions(m map[string]any) map[string]any { return m["decisions"].(map[string]any) }

func verifying(t *testing.T, repo string, keys ...string) *graph.Runtime {
	t.Helper()
	v, err := loop.LoadVerifier(context.Background(), loop.TrustSource{Keys: keys})
	require.NoError(t, err)
	rt, err := loop.Open(repo, loop.Options{DecisionVerifier: v})
	require.NoError(t, err)
	return rt
}

func TestSignedDecisionIsRecordedAndVerified(t *testing.T) {
	repo, signer := signedRepo(t)
	st, err := loop.NewStore(repo, "").Load(context.Background(), "issue-42")
	require.NoError(t, err)
	d, ok := st.Decisions.Get("requirements-approval")
	require.True(t, ok)
	require.NotNil(t, d.Signature)
	require.Equal(t, signer.PublicKey(), d.Signature.Key)
	require.Equal(t, graph.DecisionSubject{WorkItem: "issue-42", Ref: "github:acme/widgets#42", Loop: "pdlc-work-item-loop", Gate: "requirements-approval"}, d.Signature.Subject)
	require.Equal(t, "@dana", d.By)
	require.Equal(t, "https://github.com/acme/widgets/issues/42#issuecomment-"+d.Comment, d.CommentURL)
	require.Len(t, d.Artifacts, 1)
	require.Equal(t, "requirements.md", d.Artifacts[0].Name)
	sel, _ := st.Decisions.Get("phase-selection")
	require.NotNil(t, sel.Signature, "the selection is signed too")

	// The lock names its decision.
	req, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-42/requirements.md"))
	require.NoError(t, err)
	require.Contains(t, string(req), `decision: "requirements-approval/`+d.Comment+`"`)

	rt := verifying(t, repo, signer.PublicKey())
	rep, err := rt.Status(context.Background(), "issue-42", true)
	require.NoError(t, err)
	require.Equal(t, "design", rep.CurrentNode)
	verdicts, err := rt.VerifyDecisions(context.Background(), "issue-42")
	require.NoError(t, err)
	require.Len(t, verdicts, 2)
	for _, v := range verdicts {
		require.Equal(t, graph.DecisionVerified, v.Verdict, v.Reason)
	}

	// A round trip through a Python-style rewrite of graph-state.json
	// (re-indented, keys re-ordered, an unknown field added) keeps it valid.
	editState(t, repo, "issue-42", func(m map[string]any) { m["pythonOnly"] = map[string]any{"x": 1} })
	rep, err = rt.Status(context.Background(), "issue-42", true)
	require.NoError(t, err)
	require.Equal(t, "design", rep.CurrentNode)
	// And through our own parse and marshal.
	data, err := os.ReadFile(statePath(repo, "issue-42"))
	require.NoError(t, err)
	parsed, err := graph.ParseState("issue-42", data)
	require.NoError(t, err)
	out, err := graph.MarshalState(parsed)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(statePath(repo, "issue-42"), out, 0o644))
	rep, err = rt.Status(context.Background(), "issue-42", true)
	require.NoError(t, err)
	require.Equal(t, "design", rep.CurrentNode)
}

func TestForgedDecisionsAreRefused(t *testing.T) {
	_, other, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		forge   func(t *testing.T, repo string, signer *loop.Signer) (id, gate string)
		trust   func(signer *loop.Signer) []string
		want    string
		wantErr error
	}{
		{"unsigned", func(t *testing.T, repo string, _ *loop.Signer) (string, string) {
			editState(t, repo, "issue-42", func(m map[string]any) {
				delete(decisions(m)["requirements-approval"].(map[string]any), "signature")
			})
			return "issue-42", "requirements-approval"
		}, nil, "carries no signature", graph.ErrDecisionUnsigned},
		{"hand-written", func(t *testing.T, repo string, _ *loop.Signer) (string, string) {
			editState(t, repo, "issue-42", func(m map[string]any) {
				decisions(m)["design-approval"] = map[string]any{"outcome": "approved", "by": "@dana"}
			})
			return "issue-42", "design-approval"
		}, nil, "carries no signature", graph.ErrDecisionUnsigned},
		{"mis-signed", func(t *testing.T, repo string, _ *loop.Signer) (string, string) {
			editState(t, repo, "issue-42", func(m map[string]any) {
				decisions(m)["requirements-approval"].(map[string]any)["by"] = "@mallory"
			})
			return "issue-42", "requirements-approval"
		}, nil, "does not match its signature", graph.ErrDecisionBadSignature},
		{"replayed-gate", func(t *testing.T, repo string, _ *loop.Signer) (string, string) {
			editState(t, repo, "issue-42", func(m map[string]any) {
				decisions(m)["design-approval"] = decisions(m)["requirements-approval"]
			})
			return "issue-42", "design-approval"
		}, nil, "was signed for work item issue-42 (github:acme/widgets#42), loop pdlc-work-item-loop, gate requirements-approval", graph.ErrDecisionReplayed},
		{"replayed-item", func(t *testing.T, repo string, _ *loop.Signer) (string, string) {
			data, err := os.ReadFile(statePath(repo, "issue-42"))
			require.NoError(t, err)
			writeFile(t, repo, "docs/specs/issue-43/graph-state.json", string(data))
			editState(t, repo, "issue-43", func(m map[string]any) { m["workItem"] = "issue-43" })
			req, err := os.ReadFile(filepath.Join(repo, "docs/specs/issue-42/requirements.md"))
			require.NoError(t, err)
			writeFile(t, repo, "docs/specs/issue-43/requirements.md", string(req))
			return "issue-43", "requirements-approval"
		}, nil, "was signed for work item issue-42", graph.ErrDecisionReplayed},
		{"stale", func(t *testing.T, repo string, _ *loop.Signer) (string, string) {
			p := filepath.Join(repo, "docs/specs/issue-42/requirements.md")
			data, err := os.ReadFile(p)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(p, append(data, "\n2. and one more thing\n"...), 0o644))
			return "issue-42", "requirements-approval"
		}, nil, "docs/specs/issue-42/requirements.md changed after it was approved", graph.ErrDecisionStale},
		{"unknown-key", func(t *testing.T, repo string, _ *loop.Signer) (string, string) {
			return "issue-42", "requirements-approval"
		}, func(*loop.Signer) []string {
			return []string{loop.FormatPublicKey(other.Public().(ed25519.PublicKey))}
		}, "which is not one of the 1 trusted key(s)", graph.ErrDecisionUnknownKey},
	} {
		t.Run(tc.name, func(t *testing.T) {
			repo, signer := signedRepo(t)
			id, gate := tc.forge(t, repo, signer)
			keys := []string{signer.PublicKey()}
			if tc.trust != nil {
				keys = tc.trust(signer)
			}
			rt := verifying(t, repo, keys...)
			rep, err := rt.Status(context.Background(), id, true)
			require.NoError(t, err)
			n, ok := rep.Node(gate)
			require.True(t, ok)
			require.Equal(t, graph.StatusBlock, n.Status, "%v", n.Messages)
			require.Contains(t, strings.Join(n.Messages, "\n"), tc.want)
			require.NotEqual(t, "design", rep.CurrentNode == "design" && gate == "requirements-approval", "the pointer does not move past a refused gate")
			vs, err := rt.VerifyDecisions(context.Background(), id)
			require.NoError(t, err)
			found := false
			for _, v := range vs {
				if v.Gate == gate {
					found = true
					require.Equal(t, graph.DecisionRefused, v.Verdict)
					require.ErrorIs(t, v.Err, tc.wantErr)
				}
			}
			require.True(t, found)

			// Without a trust anchor the-loop's behaviour stands: the
			// record is honoured (and the CLI warns).
			plain, err := loop.Open(repo, loop.Options{})
			require.NoError(t, err)
			rep, err = plain.Status(context.Background(), id, true)
			require.NoError(t, err)
			n, _ = rep.Node(gate)
			require.Equal(t, graph.StatusPass, n.Status)
		})
	}
}

// A claim at a gate whose recorded decision is refused blocks; an inbound
// event decides the gate afresh and the new decision is signed.
func TestRefusedDecisionInLiveVerbs(t *testing.T) {
	repo, signer := signedRepoAt(t, false)
	v, err := loop.LoadVerifier(context.Background(), loop.TrustSource{Keys: []string{signer.PublicKey()}})
	require.NoError(t, err)
	tickets := graphtest.NewTickets()
	rt, err := loop.Open(repo, loop.Options{Integrations: tickets, AuthorizedUsers: []string{"dana"}, DecisionSigner: signer, DecisionVerifier: v})
	require.NoError(t, err)
	ctx := context.Background()
	editState(t, repo, "issue-42", func(m map[string]any) {
		decisions(m)["requirements-approval"] = map[string]any{"outcome": "approved", "by": "@dana"}
	})
	claim, err := rt.Complete(ctx, "issue-42", "", "agent")
	require.NoError(t, err)
	require.Equal(t, "requirements-approval", claim.CurrentNode)
	require.Equal(t, graph.StatusBlock, claim.Status)
	require.False(t, claim.Moved)
	require.Contains(t, strings.Join(claim.Messages, "\n"), "carries no signature")

	c := tickets.Comment("github:acme/widgets#42", "dana", "approved")
	step, err := rt.Advance(ctx, "issue-42", &graph.Event{ID: "d3", Comments: []graph.Comment{c}})
	require.NoError(t, err)
	require.Equal(t, "design", step.CurrentNode, "%v", step.Messages)
	vs, err := rt.VerifyDecisions(ctx, "issue-42")
	require.NoError(t, err)
	require.Len(t, vs, 2)
	for _, d := range vs {
		require.Equal(t, graph.DecisionVerified, d.Verdict, "%s: %s", d.Gate, d.Reason)
	}
}

func TestSigningKeyFile(t *testing.T) {
	root := filepath.Join(t.TempDir(), "state")
	pub, created, err := loop.InitSigningKey(root)
	require.NoError(t, err)
	require.True(t, created)
	require.True(t, strings.HasPrefix(pub, loop.KeyPrefix))
	info, err := os.Stat(loop.SigningKeyPath(root))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), info.Mode().Perm())
	again, created, err := loop.InitSigningKey(root)
	require.NoError(t, err)
	require.False(t, created, "an existing key is kept")
	require.Equal(t, pub, again)
	s, err := loop.LoadSigningKey(root)
	require.NoError(t, err)
	require.Equal(t, pub, s.PublicKey())

	require.NoError(t, os.Chmod(loop.SigningKeyPath(root), 0o644))
	_, err = loop.LoadSigningKey(root)
	require.ErrorIs(t, err, loop.ErrBadKey)

	// Never inside a checkout.
	repo := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(repo, ".git"), 0o755))
	_, _, err = loop.InitSigningKey(filepath.Join(repo, ".the-loop"))
	require.ErrorIs(t, err, loop.ErrBadKey)
	require.ErrorContains(t, err, "inside the git checkout")

	// Trust anchors: rotation (several keys), labels and comments; a named
	// source without keys fails closed.
	_, p2, _ := ed25519.GenerateKey(nil)
	k2 := loop.FormatPublicKey(p2.Public().(ed25519.PublicKey))
	v, err := loop.LoadVerifier(context.Background(), loop.TrustSource{Env: "# keys\n" + pub + " daemon-2026\n" + k2 + ", \n"})
	require.NoError(t, err)
	require.Equal(t, 2, v.Len())
	_, err = loop.LoadVerifier(context.Background(), loop.TrustSource{Env: "# nothing"})
	require.ErrorIs(t, err, loop.ErrNoTrustAnchor)
	_, err = loop.LoadVerifier(context.Background(), loop.TrustSource{Keys: []string{"ed25519:nope"}})
	require.ErrorIs(t, err, loop.ErrBadKey)
	none, err := loop.LoadVerifier(context.Background(), loop.TrustSource{})
	require.NoError(t, err)
	require.Nil(t, none)
}

// BenchmarkCheckSignedItem is `check --recompute` of a work item whose two
// recorded decisions are signed, without and with verification (two
// Ed25519 verifications and one artifact hash per check).
func BenchmarkCheckSignedItem(b *testing.B) {
	for _, verify := range []bool{false, true} {
		b.Run(map[bool]string{false: "unverified", true: "verified"}[verify], func(b *testing.B) {
			repo, signer := signedRepo(b)
			ctx := context.Background()
			var v graph.DecisionVerifier
			if verify {
				lv, err := loop.LoadVerifier(ctx, loop.TrustSource{Keys: []string{signer.PublicKey()}})
				if err != nil {
					b.Fatal(err)
				}
				v = lv
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				rt, err := loop.Open(repo, loop.Options{WorkItem: "issue-42", DecisionVerifier: v})
				if err != nil {
					b.Fatal(err)
				}
				rep, err := rt.Status(ctx, "issue-42", true)
				if err != nil || rep.CurrentNode != "design" {
					b.Fatal(err, rep.CurrentNode)
				}
			}
		})
	}
}

// A skip is as good as a pass: with a trust anchor, a human gate counts as
// skipped only when a verified decision (the phase selection) skipped it —
// not when graph-state.json or `loopctl graph skip` says so.
func TestForgedSkipOfAHumanGate(t *testing.T) {
	repo, signer := signedRepoAt(t, false)
	editState(t, repo, "issue-42", func(m map[string]any) {
		m["skips"] = map[string]any{"requirements-approval": map[string]any{"via": "cli", "token": "requirements-approval", "by": "agent", "reason": "x"}}
	})
	ctx := context.Background()
	rt := verifying(t, repo, signer.PublicKey())
	rep, err := rt.Status(ctx, "issue-42", true)
	require.NoError(t, err)
	require.Equal(t, "requirements-approval", rep.CurrentNode)
	n, _ := rep.Node("requirements-approval")
	require.Contains(t, strings.Join(n.Messages, "\n"), "no verified decision does")

	plain, err := loop.Open(repo, loop.Options{})
	require.NoError(t, err)
	rep, err = plain.Status(ctx, "issue-42", true)
	require.NoError(t, err)
	require.Equal(t, "design", rep.CurrentNode, "without an anchor the declaration is honoured, as in the-loop")

	// The command line cannot declare it either.
	v, err := loop.LoadVerifier(ctx, loop.TrustSource{Keys: []string{signer.PublicKey()}})
	require.NoError(t, err)
	fresh, _ := signedRepoAt(t, false)
	live, err := loop.Open(fresh, loop.Options{DecisionVerifier: v})
	require.NoError(t, err)
	res, err := live.DeclareSkips(ctx, "issue-42", []string{"design-approval"}, "docs only", "agent")
	require.NoError(t, err)
	require.Empty(t, res.Declared)
	require.Contains(t, res.Rejected[0].Why, "signed phase selection")
}

// A phase selection that skips a human gate carries the skip under its
// signature, and a verifier honours it.
func TestSignedSelectionSkipsAHumanGate(t *testing.T) {
	repo := t.TempDir()
	writeFile(t, repo, ".the-loop/harness-config.yaml", harnessConfig)
	_, priv, err := ed25519.GenerateKey(nil)
	require.NoError(t, err)
	signer := loop.NewSigner(priv)
	tickets := graphtest.NewTickets()
	rt, err := loop.Open(repo, loop.Options{Integrations: tickets, AuthorizedUsers: []string{"dana"}, DecisionSigner: signer})
	require.NoError(t, err)
	ctx := context.Background()
	_, err = rt.Start(ctx, "issue-42")
	require.NoError(t, err)
	c := tickets.Comment("github:acme/widgets#42", "dana", "the-loop execute\n- [ ] brainstorming\n- [ ] requirements-definition\n- [ ] requirements-approval")
	_, err = rt.Advance(ctx, "issue-42", &graph.Event{ID: "d1", Comments: []graph.Comment{c}})
	require.NoError(t, err)
	st, err := loop.NewStore(repo, "").Load(ctx, "issue-42")
	require.NoError(t, err)
	sel, _ := st.Decisions.Get("phase-selection")
	if !st.Skips.Has("requirements-approval") {
		t.Skipf("the selection did not skip requirements-approval (skips %v); nothing to verify", st.Skips.Keys())
	}
	require.Contains(t, sel.Skips, "requirements-approval")
	rep, err := verifying(t, repo, signer.PublicKey()).Status(ctx, "issue-42", true)
	require.NoError(t, err)
	n, _ := rep.Node("requirements-approval")
	require.Equal(t, graph.StatusSkip, n.Status, "%v", n.Messages)
}

// The daemon's own runtime signs and verifies with one key: a forged record
// does not move it either.
func TestSignerVerifierForTheDaemon(t *testing.T) {
	repo, signer := signedRepoAt(t, false)
	editState(t, repo, "issue-42", func(m map[string]any) {
		decisions(m)["requirements-approval"] = map[string]any{"outcome": "approved", "by": "@dana"}
	})
	rt, err := loop.Open(repo, loop.Options{DecisionSigner: signer, DecisionVerifier: signer.Verifier()})
	require.NoError(t, err)
	step, err := rt.Advance(context.Background(), "issue-42", nil)
	require.NoError(t, err)
	require.False(t, step.Moved)
	require.Equal(t, "requirements-approval", step.CurrentNode)
}

// A decision authorized by a rule GitHub answered (the daemon sets the
// comment's AuthorizedBy) records the rule under the signature: the rule
// verifies, an edited rule is refused, and a decision without a rule (the
// form signed before rules existed) still verifies (TestSignedDecisionIsRecordedAndVerified).
func TestSignedDecisionRecordsTheAuthorizingRule(t *testing.T) {
	repo, signer := signedRepoAt(t, false)
	rt, err := loop.Open(repo, loop.Options{Integrations: graphtest.NewTickets(), AuthorizedUsers: []string{"dana"}, DecisionSigner: signer,
		Clock: graphtest.NewClock(time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC))})
	require.NoError(t, err)
	step, err := rt.Advance(context.Background(), "issue-42", &graph.Event{ID: "d3", Comments: []graph.Comment{
		{ID: "991", Author: "erin", Body: "Approved", AuthorizedBy: "team:acme/reviewers"},
	}})
	require.NoError(t, err)
	require.Equal(t, "design", step.CurrentNode, "erin is on no allowlist, but the daemon's rule let her in")
	st, err := loop.NewStore(repo, "").Load(context.Background(), "issue-42")
	require.NoError(t, err)
	d, ok := st.Decisions.Get("requirements-approval")
	require.True(t, ok)
	require.Equal(t, "@erin", d.By)
	require.Equal(t, "team:acme/reviewers", d.Rule)

	v := verifying(t, repo, signer.PublicKey())
	verdicts, err := v.VerifyDecisions(context.Background(), "issue-42")
	require.NoError(t, err)
	for _, vd := range verdicts {
		require.Equal(t, graph.DecisionVerified, vd.Verdict, vd.Reason)
	}
	editState(t, repo, "issue-42", func(m map[string]any) {
		decisions(m)["requirements-approval"].(map[string]any)["rule"] = "permission:admin"
	})
	verdicts, err = v.VerifyDecisions(context.Background(), "issue-42")
	require.NoError(t, err)
	for _, vd := range verdicts {
		if vd.Gate == "requirements-approval" {
			require.Equal(t, graph.DecisionRefused, vd.Verdict, "the rule is covered by the signature")
		}
	}
}
