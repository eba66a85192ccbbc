package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
)

type testIO struct {
	out, err *bytes.Buffer
}

// testFactory is a world of buffers, a temp working directory and home, and
// (optionally) the ticket stand-in as integrations.
func testFactory(t *testing.T, cwd string, tickets *graphtest.Tickets) (*Factory, testIO) {
	t.Helper()
	out, errb := &bytes.Buffer{}, &bytes.Buffer{}
	home := t.TempDir()
	// The operator's config keeps the event log out of the source tree.
	state := t.TempDir()
	cfgPath := filepath.Join(state, "cli-config.yaml")
	require.NoError(t, os.WriteFile(cfgPath, []byte("state:\n  root: "+state+"\n"), 0o644))
	env := map[string]string{"HOME": home, "THE_LOOP_CLI_CONFIG": cfgPath}
	f := &Factory{
		IO:      IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errb},
		Getenv:  func(k string) string { return env[k] },
		Getwd:   func() (string, error) { return cwd, nil },
		HomeDir: func() (string, error) { return home, nil },
		Clock:   graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)),
		Integrations: func(*loop.CLIConfig, graph.Sink) (graph.Integrations, []string, error) {
			if tickets == nil {
				return nil, nil, nil
			}
			return tickets, nil, nil
		},
	}
	return f, testIO{out, errb}
}

func write(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// --- parsing: argv → options, no behaviour ------------------------------------

func TestCheckParsesFlagsAfterTheWorkItem(t *testing.T) {
	cases := []struct {
		argv []string
		want checkOptions
		code int
	}{
		{[]string{"check", "issue-42", "--recompute", "--fail-on", "block", "--format", "json"}, checkOptions{ID: "issue-42", Recompute: true, FailOn: "block", Format: "json"}, 0},
		{[]string{"check", "--recompute", "issue-42"}, checkOptions{ID: "issue-42", Recompute: true, FailOn: "unmet", Format: "table"}, 0},
		{[]string{"check", "--all", "--repo", "/r", "--graph=/g.yaml"}, checkOptions{All: true, FailOn: "unmet", Format: "table", Repo: repoFlags{Repo: "/r", GraphFile: "/g.yaml"}}, 0},
		{[]string{"check"}, checkOptions{}, exitRefused},
		{[]string{"check", "a", "--all"}, checkOptions{}, exitRefused},
		{[]string{"check", "a", "--format", "yaml"}, checkOptions{}, exitRefused},
		{[]string{"check", "a", "--fail-on", "sometimes"}, checkOptions{}, exitRefused},
		{[]string{"check", "a", "--bogus"}, checkOptions{}, exitRefused},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			f, io := testFactory(t, t.TempDir(), nil)
			var got *checkOptions
			app := newApp(f)
			app.Commands[0] = newCheckCmd(f, func(o *checkOptions) error { got = o; return nil })
			code := mainWith(app, append([]string{"loopctl"}, tc.argv...), f)
			require.Equal(t, tc.code, code, io.err.String())
			if tc.code != 0 {
				require.Nil(t, got)
				require.NotEmpty(t, io.err.String(), "a refusal says why")
				return
			}
			require.NotNil(t, got)
			require.Equal(t, tc.want.ID, got.ID)
			require.Equal(t, tc.want.All, got.All)
			require.Equal(t, tc.want.Recompute, got.Recompute)
			require.Equal(t, tc.want.Format, got.Format)
			require.Equal(t, tc.want.FailOn, got.FailOn)
			require.Equal(t, tc.want.Repo.Repo, got.Repo.Repo)
			require.Equal(t, tc.want.Repo.GraphFile, got.Repo.GraphFile)
		})
	}
}

func TestGraphVerbsParse(t *testing.T) {
	f, _ := testFactory(t, t.TempDir(), nil)
	var force *forceOptions
	var skip *skipOptions
	var complete *completeOptions
	app := newApp(f)
	for _, c := range app.Commands {
		if c.Name != "graph" {
			continue
		}
		for i, sc := range c.Subcommands {
			switch sc.Name {
			case "force":
				c.Subcommands[i] = newForceCmd(f, func(o *forceOptions) error { force = o; return nil })
			case "skip":
				c.Subcommands[i] = newSkipCmd(f, func(o *skipOptions) error { skip = o; return nil })
			case "complete":
				c.Subcommands[i] = newCompleteCmd(f, func(o *completeOptions) error { complete = o; return nil })
			}
		}
	}
	require.Equal(t, 0, mainWith(app, []string{"loopctl", "graph", "force", "issue-1", "--to", "design", "--reason", "met in person"}, f))
	require.Equal(t, forceOptions{Factory: f, WorkItem: "issue-1", To: "design", Reason: "met in person"}, *force)
	require.Equal(t, 0, mainWith(app, []string{"loopctl", "graph", "skip", "issue-1", "--set", "review-chain", "--node", "evidence", "--reason", "docs only"}, f))
	require.Equal(t, []string{"evidence", "review-chain"}, skip.Tokens)
	require.Equal(t, 0, mainWith(app, []string{"loopctl", "graph", "complete", "--pr", "7", "issue-1", "--pr-repo", "octo/infra"}, f))
	require.Equal(t, "issue-1", complete.WorkItem)
	require.Equal(t, 7, complete.Repo.PR)
	require.Equal(t, "octo/infra", complete.Repo.PRRepo)
	require.Equal(t, exitRefused, mainWith(app, []string{"loopctl", "graph", "complete"}, f), "a work item is required")
}

// --- behaviour: run functions over real repositories ---------------------------

func newRepo(t *testing.T) string {
	repo := t.TempDir()
	write(t, repo, ".the-loop/harness-config.yaml", "ticketing:\n  github: {owner: acme, repo: widgets}\n")
	write(t, repo, "docs/specs/issue-42/requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n")
	return repo
}

func TestCheckExitCodesAndFormats(t *testing.T) {
	repo := newRepo(t)
	f, io := testFactory(t, repo, nil)
	code := Main([]string{"loopctl", "check", "issue-42", "--recompute", "--format", "json"}, f)
	require.Equal(t, exitFailed, code, "phase-selection waits: not ok")
	var rep graph.Report
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &rep))
	require.Equal(t, "phase-selection", rep.CurrentNode)
	require.Contains(t, io.err.String(), "loopctl graph force issue-42 --to brainstorming --reason", "the CLI says how an item gets past phase-selection")
	require.Len(t, rep.Nodes, 19)
	req, _ := rep.Node("requirements-definition")
	require.Equal(t, graph.StatusPass, req.Status)

	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "check", "issue-42", "--recompute", "--fail-on", "block"}, f), "a wait is not a block")
	require.Contains(t, io.out.String(), "▶  phase-selection")

	io.out.Reset()
	code = Main([]string{"loopctl", "check", "issue-42", "--repo", filepath.Join(repo, "missing"), "--format", "json"}, f)
	require.Equal(t, exitRefused, code)
	require.Contains(t, io.out.String(), `"repoResolved": false`)
	require.Contains(t, io.err.String(), "--repo "+filepath.Join(repo, "missing")+" is not a directory; pass the repository's root")
}

// check --config FILE loads FILE: a broken config never passes in silence.
func TestCheckHonoursConfig(t *testing.T) {
	repo := newRepo(t)
	write(t, repo, "bad.yaml", "webhooks: [\n")
	write(t, repo, "unknown.yaml", "routing:\n  defaultHarnes: claude\n")
	for _, name := range []string{"bad.yaml", "unknown.yaml"} {
		f, io := testFactory(t, repo, nil)
		code := Main([]string{"loopctl", "check", "issue-42", "--config", filepath.Join(repo, name)}, f)
		require.Equal(t, exitRefused, code, io.out.String())
		require.Contains(t, io.err.String(), "--config "+filepath.Join(repo, name))
	}
	write(t, repo, "good.yaml", "routing:\n  defaultHarness: claude\n")
	f, io := testFactory(t, repo, nil)
	code := Main([]string{"loopctl", "check", "issue-42", "--config", filepath.Join(repo, "good.yaml"), "--fail-on", "block"}, f)
	require.Equal(t, exitOK, code, io.err.String())
}

func TestGraphCompleteEnvelopeAndForceRefusals(t *testing.T) {
	repo := newRepo(t)
	tickets := graphtest.NewTickets()
	f, io := testFactory(t, repo, tickets)
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "complete", "issue-42"}, f))
	var claim graph.Claim
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &claim))
	// issue-42 holds requirements.md but no graph-state.json: a claim on an
	// item that never started is refused (only the report reconstructs the
	// state, R8.3).
	require.Equal(t, graph.StepRefused, claim.Status)
	require.Equal(t, "not-started", claim.Reason)

	io.out.Reset()
	io.err.Reset()
	require.Equal(t, exitRefused, Main([]string{"loopctl", "graph", "force", "issue-42", "--to", "design"}, f))
	require.Contains(t, io.err.String(), "refused: a reason is required")
	require.Contains(t, io.err.String(), "(--reason)", "loopctl names its flag")
	io.err.Reset()
	require.Equal(t, exitFailed, Main([]string{"loopctl", "graph", "advance", "issue-42"}, f))
	require.Contains(t, io.err.String(), "work item has not entered the graph; start it first (the daemon does on `the-loop start`, or `loopctl graph run`)")
	require.Equal(t, exitRefused, Main([]string{"loopctl", "graph", "force", "issue-42", "--to", "desgin", "--reason", "x"}, f))
	require.Contains(t, io.err.String(), "declared nodes are: phase-selection, brainstorming")

	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "force", "issue-42", "--to", "requirements-definition", "--reason", "agreed offline", "--actor", "@ops"}, f))
	require.Contains(t, tickets.Comments("github:acme/widgets#42")[0], "**forced transition**")
	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "complete", "issue-42"}, f))
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &claim))
	require.Equal(t, graph.StatusPass, claim.Status)
	require.True(t, claim.Moved)
	require.Equal(t, "requirements-approval", claim.CurrentNode)

	// Another process holds the item: the claim envelope says busy (the
	// agent's skill documents it), where the kernel reports graph.ErrBusy.
	unlock, err := loop.NewStore(repo, "docs/specs").Lock(context.Background(), "issue-42", time.Second)
	require.NoError(t, err)
	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "complete", "issue-42"}, f))
	unlock()
	claim = graph.Claim{}
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &claim))
	require.Equal(t, graph.Claim{Node: "", Status: "busy", Reason: "busy", Messages: []string{"another theloop process holds the graph-state lock; try again"}}, claim)

	// CI still sees the forced transition for what it is.
	io.out.Reset()
	require.Equal(t, exitFailed, Main([]string{"loopctl", "check", "issue-42", "--recompute"}, f))
	require.Contains(t, io.out.String(), "current node: phase-selection")
}

func TestGraphVerifyProvesTheShippedGraphs(t *testing.T) {
	f, io := testFactory(t, t.TempDir(), nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "verify"}, f), io.out.String())
	out := io.out.String()
	require.Equal(t, 4, strings.Count(out, "proved    gates-guard-what-follows"))
	require.Contains(t, out, "proved    phase-selection-cannot-be-routed-around")
	require.NotContains(t, out, "violated")
}

func TestGraphVerifyFindsACounterexample(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "leaky.yaml", `name: leaky
start: phase-selection
nodes:
  - {id: phase-selection, actor: human, required: true, exit: [classify-phase-selection]}
  - {id: requirements, produces: requirements.md}
  - {id: approval, actor: human, exit: [classify-feedback]}
  - {id: design}
  - {id: shortcut}
edges:
  - {from: phase-selection, on: selected, to: requirements}
  - {from: requirements, on: pass, to: approval}
  - {from: requirements, on: oops, to: shortcut}
  - {from: shortcut, on: pass, to: design}
  - {from: approval, on: approved, to: design}
  - {from: approval, on: pass, to: design}
`)
	f, io := testFactory(t, dir, nil)
	require.Equal(t, exitFailed, Main([]string{"loopctl", "graph", "verify", "--graph", filepath.Join(dir, "leaky.yaml")}, f))
	out := io.out.String()
	require.Contains(t, out, "violated  gates-guard-what-follows")
	require.Contains(t, out, "counterexample: requirements → shortcut → design")
	require.Contains(t, out, "violated  human-gates-exit-through-classify")
}

func TestGraphShowFormats(t *testing.T) {
	repo := newRepo(t)
	f, io := testFactory(t, repo, nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "show"}, f))
	require.True(t, strings.HasPrefix(io.out.String(), "graph v1, start: phase-selection\nphase-selection [required, human]\n    --selected--> brainstorming\n"))
	for _, format := range []string{"json", "mermaid", "dot"} {
		io.out.Reset()
		require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "show", "--format", format, "--work-item", "issue-42"}, f), io.err.String())
	}
	require.Contains(t, io.out.String(), `"phase-selection" [label="phase-selection", shape=hexagon, style="filled,bold", fillcolor="#ffd966"];`)
	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "hooks"}, f))
	require.Contains(t, io.out.String(), "set-phase-label")
	require.Contains(t, io.out.String(), "github.set-labels")
	require.Contains(t, io.out.String(), "sections:strings, checkmarks:string")
	require.Contains(t, io.out.String(), "tool:string!")
	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "hooks", "--format", "json"}, f))
	var hooksOut []struct {
		Name   string `json:"name"`
		Params []struct {
			Name     string `json:"name"`
			Type     string `json:"type"`
			Required bool   `json:"required"`
		} `json:"params"`
	}
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &hooksOut))
	for _, h := range hooksOut {
		if h.Name == "mcp-call" {
			require.Equal(t, "tool", h.Params[0].Name)
			require.Equal(t, "string", h.Params[0].Type)
			require.True(t, h.Params[0].Required)
		}
	}
}

// `check --format json` agrees with the-loop v11.2 for every conformance work
// item, through the command (same bar as the hooks' conformance test).
func TestCheckJSONAgreesWithTheLoopV11(t *testing.T) {
	conf := filepath.Join("..", "..", "..", "shared", "conformance", "the-loop-v11")
	data, err := os.ReadFile(filepath.Join(conf, "expected.json"))
	if errors.Is(err, fs.ErrNotExist) {
		t.Skip("conformance data not present")
	}
	require.NoError(t, err)
	var expected map[string]struct {
		CurrentNode string `json:"currentNode"`
		OK          bool   `json:"ok"`
		Nodes       []struct {
			Node   string `json:"node"`
			Status string `json:"status"`
		} `json:"nodes"`
	}
	require.NoError(t, json.Unmarshal(data, &expected))
	repo := t.TempDir()
	require.NoError(t, os.CopyFS(repo, os.DirFS(filepath.Join(conf, "repo"))))
	f, io := testFactory(t, repo, nil)
	code := Main([]string{"loopctl", "check", "--all", "--recompute", "--format", "json", "--graph", filepath.Join(conf, "graphs", "pdlc-work-item-loop.yaml")}, f)
	require.Contains(t, []int{exitOK, exitFailed}, code, io.err.String())
	var reports []graph.Report
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &reports))
	require.Len(t, reports, len(expected))
	var ids []string
	agree := 0
	for _, rep := range reports {
		ids = append(ids, rep.WorkItem)
		want := expected[rep.WorkItem]
		ok := rep.CurrentNode == want.CurrentNode && rep.OK == want.OK && len(rep.Nodes) == len(want.Nodes)
		for i := range want.Nodes {
			if i < len(rep.Nodes) && (rep.Nodes[i].Node != want.Nodes[i].Node || string(rep.Nodes[i].Status) != want.Nodes[i].Status) {
				ok = false
			}
		}
		if ok {
			agree++
		} else {
			t.Errorf("%s disagrees with the-loop v11.2", rep.WorkItem)
		}
	}
	require.True(t, sort.StringsAreSorted(ids))
	t.Logf("loopctl check --all: %d/%d work items agree with the-loop v11.2", agree, len(expected))
}

func TestDemoWalksToComplete(t *testing.T) {
	f, io := testFactory(t, t.TempDir(), nil)
	dir := filepath.Join(t.TempDir(), "demo")
	code := Main([]string{"loopctl", "demo", "--dir", dir}, f)
	require.Equal(t, exitOK, code, io.err.String())
	out := io.out.String()
	for _, want := range []string{
		"theloop requirements-definition: block — stays at requirements-definition",
		"theloop requirements-approval: wait — stays at requirements-approval",
		"theloop requirements-approval: changes-requested → now at requirements-definition",
		"theloop requirements-approval: approved-with-comments → now at design",
		"boundary named upstream is unanswered here: trust boundary",
		"theloop human-approval: approved → now at complete",
		"current node: complete (recomputed from the artifacts) — ok",
		"class complete current",
		"labels on the ticket: loop:complete",
	} {
		require.Contains(t, out, want)
	}
	req, err := os.ReadFile(filepath.Join(dir, "docs", "specs", "issue-1", "requirements.md"))
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(req), "---\nstatus: approved\napprovedBy: [\"@dana\"]\ndecision: \"requirements-approval"), "the gate wrote the lock, naming its decision: %s", req)
	_, err = os.Stat(filepath.Join(dir, ".git"))
	require.NoError(t, err, "a real git repository")
	tracked, err := exec.Command("git", "-C", dir, "ls-files").Output()
	require.NoError(t, err)
	require.NotContains(t, string(tracked), "graph-state.lock", "lock files are not committed")
	require.Contains(t, string(tracked), "docs/specs/issue-1/graph-state.json")
}
