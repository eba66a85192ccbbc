package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
	"github.com/theloop-dev/theloop/loop"
)

// Issue 10, tried as a newcomer would: argv → exit code, stdout, stderr and
// the files on disk. Each test names the item of the issue it holds.

// plainFactory is a world with no CLI config at all (the defaults a
// newcomer has), working in cwd.
func plainFactory(t *testing.T, cwd string) (*Factory, testIO) {
	t.Helper()
	out, errb := &bytes.Buffer{}, &bytes.Buffer{}
	home := t.TempDir()
	f := &Factory{
		IO:      IOStreams{In: strings.NewReader(""), Out: out, ErrOut: errb},
		Getenv:  func(k string) string { return map[string]string{"HOME": home}[k] },
		Getwd:   func() (string, error) { return cwd, nil },
		HomeDir: func() (string, error) { return home, nil },
		Clock:   graphtest.NewClock(time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)),
		Integrations: func(*loop.CLIConfig, graph.Sink) (graph.Integrations, []string, error) {
			return graphtest.NewTickets(), nil, nil
		},
	}
	return f, testIO{out, errb}
}

func (io testIO) reset() { io.out.Reset(); io.err.Reset() }

// gitRepo is a real git repository with two work items, issue-1 and
// issue-239.
func gitRepo(t *testing.T) string {
	t.Helper()
	repo := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		t.Skipf("git is needed: %v %s", err, out)
	}
	write(t, repo, "docs/specs/issue-1/requirements.md", "# R\n")
	write(t, repo, "docs/specs/issue-239/requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n")
	return repo
}

// tree hashes every file under dir except .git's object store, so a test
// can say "nothing changed".
func tree(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if d.IsDir() {
			files[rel+"/"] = ""
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		files[rel] = hex.EncodeToString(sum[:])
		return nil
	}))
	return files
}

func noRepositoryAbove(t *testing.T, dir string) {
	t.Helper()
	if root, ok := loop.FindRoot(filepath.Dir(dir)); ok {
		t.Skipf("the temp directory is inside a repository (%s)", root)
	}
}

// Item 1: the demo never rewrites a user's repository.
func TestNewcomerDemoRefusesAnExistingRepository(t *testing.T) {
	repo := gitRepo(t)
	write(t, repo, ".claude/settings.json", "{}\n")
	write(t, repo, ".the-loop/harness-config.yaml", "ticketing:\n  github: {owner: me, repo: mine}\n")
	before := tree(t, repo)
	f, io := plainFactory(t, repo)
	require.Equal(t, exitRefused, Main([]string{"loopctl", "demo", "--dir", repo}, f))
	require.Contains(t, io.err.String(), "is not empty")
	require.Empty(t, io.out.String())
	require.Equal(t, before, tree(t, repo), "the repository is untouched")

	// A file is not a directory either.
	file := filepath.Join(t.TempDir(), "f")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	io.reset()
	require.Equal(t, exitRefused, Main([]string{"loopctl", "demo", "--dir", file}, f))
}

func TestNewcomerDemoRunsInAnEmptyDirectory(t *testing.T) {
	dir := t.TempDir()
	f, io := plainFactory(t, dir)
	require.Equal(t, exitOK, Main([]string{"loopctl", "demo", "--dir", dir}, f), io.err.String())
	// A second run in the same, now populated, directory is refused
	// instead of panicking.
	io.reset()
	require.Equal(t, exitRefused, Main([]string{"loopctl", "demo", "--dir", dir}, f))
	require.Contains(t, io.err.String(), "is not empty")
}

// Item 2: from a subdirectory, loopctl sees the whole repository and
// creates nothing relative to the working directory.
func TestNewcomerWorksFromASubdirectory(t *testing.T) {
	repo := gitRepo(t)
	sub := filepath.Join(repo, "docs", "specs", "issue-239")
	f, io := plainFactory(t, sub)

	code := Main([]string{"loopctl", "check", "--all", "--recompute"}, f)
	require.Equal(t, exitFailed, code, "both items wait at phase selection: not ok")
	require.Contains(t, io.out.String(), "2 work item(s)")
	require.Contains(t, io.out.String(), "issue-239")

	io.reset()
	require.Equal(t, exitFailed, Main([]string{"loopctl", "check", "issue-239", "--recompute", "--format", "json"}, f))
	var rep graph.Report
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &rep))
	req, _ := rep.Node("requirements-definition")
	require.Equal(t, graph.StatusPass, req.Status, "the artifacts were found from the subdirectory")

	io.reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "force", "issue-239", "--to", "requirements-definition", "--reason", "r"}, f), io.err.String())
	io.reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "complete", "issue-239"}, f), io.err.String())
	var claim graph.Claim
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &claim))
	require.Equal(t, "requirements-approval", claim.CurrentNode, "the claim ran against the real work item")

	// Item 13: show marks where check --recompute says the item stands.
	io.reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "show", "-w", "issue-239", "--format", "mermaid"}, f), io.err.String())
	require.Contains(t, io.out.String(), "class phase_selection current")
	require.Contains(t, io.err.String(), "its stored pointer is at requirements-approval")

	for _, stray := range []string{"docs/.the-loop", "docs/specs/.the-loop", "docs/specs/issue-239/.the-loop", "docs/specs/issue-239/docs", "docs/docs"} {
		_, err := os.Stat(filepath.Join(repo, filepath.FromSlash(stray)))
		require.ErrorIs(t, err, fs.ErrNotExist, "%s must not be created", stray)
	}
	_, err := os.Stat(filepath.Join(repo, ".the-loop", "logs", "events.jsonl"))
	require.NoError(t, err, "the event log is at the repository root")
}

// Item 3: outside any repository nothing runs and nothing is created.
func TestNewcomerOutsideARepository(t *testing.T) {
	dir := t.TempDir()
	noRepositoryAbove(t, dir)
	f, io := plainFactory(t, dir)
	for _, argv := range [][]string{
		{"check", "--all"},
		{"check", "--all", "--recompute", "--format", "json"},
		{"check", "issue-1"},
		{"graph", "run", "issue-1"},
		{"graph", "run", "issue-1", "--create"},
		{"graph", "complete", "issue-1"},
	} {
		t.Run(strings.Join(argv, " "), func(t *testing.T) {
			io.reset()
			require.Equal(t, exitFailed, Main(append([]string{"loopctl"}, argv...), f))
			require.Contains(t, io.err.String(), "no .git or .the-loop/harness-config.yaml in "+dir)
			require.Contains(t, io.err.String(), "pass --repo")
		})
	}
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	require.Empty(t, entries, "nothing was created")

	// A repository with no work items: check --all does not pass on nothing.
	require.NoError(t, os.Mkdir(filepath.Join(dir, ".git"), 0o755))
	io.reset()
	require.Equal(t, exitFailed, Main([]string{"loopctl", "check", "--all", "--recompute"}, f))
	require.Contains(t, io.err.String(), "no work items in "+dir)
}

// Item 4 and issue 9 item 6: unknown and malformed work items are refused,
// and nothing is created for them.
func TestNewcomerUnknownWorkItems(t *testing.T) {
	repo := gitRepo(t)
	f, io := plainFactory(t, repo)
	before := tree(t, repo)
	cases := []struct {
		argv []string
		code int
		err  string
	}{
		{[]string{"check", "issue-999"}, exitFailed, "no such work item: issue-999"},
		{[]string{"check", "issue-999", "--recompute", "--format", "json"}, exitFailed, "no such work item: issue-999"},
		{[]string{"graph", "run", "isue-1"}, exitFailed, "did you mean issue-1?"},
		{[]string{"graph", "complete", "typo"}, exitFailed, "known work items: issue-1, issue-239"},
		{[]string{"graph", "status", "issue-2390"}, exitFailed, "did you mean issue-239?"},
		{[]string{"graph", "advance", "nope"}, exitFailed, "no such work item: nope"},
		{[]string{"graph", "force", "nope", "--to", "design", "--reason", "r"}, exitFailed, "no such work item: nope"},
		{[]string{"graph", "skip", "nope", "--set", "review-chain", "--reason", "r"}, exitFailed, "no such work item: nope"},
		{[]string{"graph", "show", "-w", "nope"}, exitFailed, "no such work item: nope"},
		{[]string{"graph", "complete", " "}, exitRefused, "contains whitespace"},
		{[]string{"graph", "complete", "issue-1 "}, exitRefused, "contains whitespace"},
		{[]string{"graph", "complete", "issue-1\n"}, exitRefused, "contains whitespace"},
		{[]string{"graph", "run", "issue-7 ", "--create"}, exitRefused, "contains whitespace"},
		{[]string{"check", "\t"}, exitRefused, "contains whitespace"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			io.reset()
			require.Equal(t, tc.code, Main(append([]string{"loopctl"}, tc.argv...), f), io.err.String())
			require.Contains(t, io.err.String(), tc.err)
			if !strings.Contains(strings.Join(tc.argv, " "), "json") {
				require.Empty(t, io.out.String())
			}
			require.Equal(t, before, tree(t, repo), "nothing was created")
		})
	}

	// An explicit start creates the new item.
	io.reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "run", "issue-2", "--create"}, f), io.err.String())
	require.Contains(t, io.out.String(), "started at phase-selection")
	_, err := os.Stat(filepath.Join(repo, "docs", "specs", "issue-2", "graph-state.json"))
	require.NoError(t, err)
}

// Item 5: compile warnings are shown, and verify does not call a graph
// that cannot finish proved.
func TestNewcomerGraphWarningsAreShown(t *testing.T) {
	repo := gitRepo(t)
	write(t, repo, "stuck.yaml", `name: stuck
start: a
nodes:
  - {id: a}
  - {id: b}
  - {id: complete, terminal: true}
edges:
  - {from: a, on: pass, to: b}
  - {from: b, on: pass, to: a}
`)
	f, io := plainFactory(t, repo)
	g := filepath.Join(repo, "stuck.yaml")
	require.Equal(t, exitFailed, Main([]string{"loopctl", "graph", "verify", "--graph", g}, f))
	out := io.out.String()
	require.Contains(t, out, "warning   ")
	require.Contains(t, out, "node 'complete' is unreachable from the start node 'a'")
	require.Contains(t, out, "violated  a-terminal-node-is-reachable")
	require.Contains(t, out, "no terminal node (complete) is reachable from the start node a")

	io.reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "show", "--graph", g}, f))
	require.Contains(t, io.err.String(), "warning: "+g+":")
	require.Contains(t, io.err.String(), "unreachable")
}

// Item 6: an escalated node keeps no stale reason and moves on once fixed.
func TestNewcomerEscalatedNodeMovesOnAfterTheFix(t *testing.T) {
	repo := gitRepo(t)
	require.NoError(t, os.Remove(filepath.Join(repo, "docs", "specs", "issue-1", "requirements.md")))
	f, io := plainFactory(t, repo)
	claim := func() graph.Claim {
		t.Helper()
		io.reset()
		code := Main([]string{"loopctl", "graph", "complete", "issue-1"}, f)
		var c graph.Claim
		require.NoError(t, json.Unmarshal(io.out.Bytes(), &c), "the envelope is printed whatever the exit status")
		want := exitOK
		if c.Status == graph.StatusBlock || c.Status == graph.StepEscalated {
			want = exitFailed // a claim whose checks did not hold exits 1
		}
		require.Equal(t, want, code, io.err.String())
		require.NotContains(t, io.err.String(), "loopctl:", "no error message: the JSON is the answer")
		return c
	}
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "force", "issue-1", "--to", "requirements-definition", "--reason", "r"}, f))
	claim()
	esc := claim()
	require.Equal(t, graph.StepEscalated, esc.Status)
	require.Contains(t, esc.Messages, "a human can move it on by hand: `loopctl graph force issue-1 --to <node> --reason \"...\"`", "loopctl adds its command to the kernel's escalation")
	parked := func() *graph.Parked {
		st, err := loop.NewStore(repo, "").Load(t.Context(), "issue-1")
		require.NoError(t, err)
		return st.Parked
	}
	require.Contains(t, parked().Reason, "required artifact is missing")

	// A partial fix: still escalated, with the current reason.
	write(t, repo, "docs/specs/issue-1/requirements.md", "# R\n\n## Requirements\n\n1. x\n")
	require.Equal(t, graph.StepEscalated, claim().Status)
	require.NotContains(t, parked().Reason, "required artifact is missing", "the reason is not stale")
	require.Contains(t, parked().Reason, "Security considerations")

	// The fix: it moves on, no force needed.
	write(t, repo, "docs/specs/issue-1/requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n")
	c := claim()
	require.Equal(t, graph.StatusPass, c.Status)
	require.Equal(t, "requirements-approval", c.CurrentNode)

	// Forcing the current node is a reset without an undeclared-edge warning.
	io.reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "graph", "force", "issue-1", "--to", "requirements-approval", "--reason", "retry"}, f))
	require.NotContains(t, io.err.String(), "not a declared edge")
}

// Items 7 and 8: exit codes as the README says, usage errors on stderr
// only, stray arguments refused.
func TestNewcomerExitCodes(t *testing.T) {
	repo := gitRepo(t)
	f, io := plainFactory(t, repo)
	cases := []struct {
		argv   []string
		code   int
		stdout string // a prefix; "" means empty
		stderr string // a substring; "" means empty
	}{
		{[]string{"chekc"}, exitRefused, "", `unknown command "chekc"; did you mean check?`},
		{[]string{"graph", "compleet"}, exitRefused, "", "did you mean complete?"},
		{[]string{"help"}, exitOK, "NAME:", ""},
		{[]string{"help", "check"}, exitOK, "NAME:\n   loopctl check", ""},
		{[]string{"help", "graph", "complete"}, exitOK, "NAME:\n   loopctl graph complete", ""},
		{[]string{"help", "chekc"}, exitRefused, "", "did you mean check?"},
		{[]string{"version"}, exitOK, "loopctl version", ""},
		{[]string{"--version"}, exitOK, "loopctl version", ""},
		{[]string{"check", "issue-1", "--recompte"}, exitRefused, "", "unknown flag --recompte; did you mean --recompute?"},
		{[]string{"graph", "complete", "issue-1", "--format", "json"}, exitRefused, "", "unknown flag --format"},
		{[]string{"check", "issue-1", "--repo", filepath.Join(repo, "nope")}, exitRefused, "", "is not a directory"},
		{[]string{"check", "issue-1", "--graph", filepath.Join(repo, "nope.yaml")}, exitRefused, "", "--graph"},
		{[]string{"graph", "show", "--loop", "nope"}, exitRefused, "", "no shipped loop named \"nope\""},
		{[]string{"graph", "verify", "--loop", "nope"}, exitRefused, "", "no shipped loop named \"nope\""},
		{[]string{"graph", "skip", "issue-1", "--set", "revew-chain", "--reason", "r"}, exitRefused, "", "did you mean review-chain?"},
		{[]string{"graph", "skip", "issue-1", "--set", "review-chain"}, exitRefused, "", "a reason is required"},
		{[]string{"check", "issue-1", "--config", filepath.Join(repo, "nope.yaml")}, exitRefused, "", "--config"},
		{[]string{"events", "--limit", "-3"}, exitRefused, "", "--limit -3"},
		{[]string{"events", "--path", filepath.Join(repo, "nope.jsonl")}, exitFailed, "", "--path"},
		// Item 8: stray positional arguments.
		{[]string{"events", "issue-239"}, exitRefused, "", `unexpected argument "issue-239"`},
		{[]string{"graph", "show", "issue-1"}, exitRefused, "", "--work-item"},
		{[]string{"graph", "verify", "pdlc-pr-loop"}, exitRefused, "", "unexpected argument"},
		{[]string{"graph", "hooks", "x"}, exitRefused, "", "unexpected argument"},
		{[]string{"demo", "somewhere"}, exitRefused, "", "--dir"},
		{[]string{"completion", "bash", "zsh"}, exitRefused, "", "name one shell"},
		{[]string{"completion", "tcsh"}, exitRefused, "", "bash, zsh or fish"},
		{[]string{"graph", "complete", "issue-1", "issue-239"}, exitRefused, "", "name one work item"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			io.reset()
			require.Equal(t, tc.code, Main(append([]string{"loopctl"}, tc.argv...), f), "stderr: %s", io.err.String())
			if tc.stdout == "" {
				require.Empty(t, io.out.String(), "usage errors never print on stdout")
			} else {
				require.True(t, strings.HasPrefix(io.out.String(), tc.stdout), io.out.String())
			}
			if tc.stderr == "" {
				require.Empty(t, io.err.String())
			} else {
				require.Contains(t, io.err.String(), tc.stderr)
			}
		})
	}
}

// Item 9: the completion engine, argv → candidates.
func TestNewcomerCompletionCandidates(t *testing.T) {
	repo := gitRepo(t)
	sub := filepath.Join(repo, "docs")
	f, io := plainFactory(t, sub)
	cases := []struct {
		words []string
		want  []string
	}{
		{[]string{""}, []string{"ask", "attention", "check", "completion", "config", "critic", "daemon", "dashboard", "demo", "events", "github", "graph", "help", "install", "instructions", "keys", "queue", "scenarios", "sessions", "uninstall", "usage", "verify-decisions", "version"}},
		{[]string{"ch"}, []string{"check"}},
		{[]string{"check", "is"}, []string{"issue-1", "issue-239"}},
		{[]string{"check", "issue-1", ""}, nil},
		{[]string{"check", "issue-1", "--rec"}, []string{"--recompute"}},
		{[]string{"check", "issue-1", "--format", ""}, []string{"json", "table"}},
		{[]string{"graph", "complete", "issue-1", "--"}, []string{"--actor", "--config", "--graph", "--help", "--jq", "--node", "--pr", "--pr-repo", "--repo", "--template", "--trust-base", "--trust-key", "--work-item"}},
		{[]string{"graph", "force", "issue-1", "--to", "design"}, []string{"design", "design-approval", "design-critic-review"}},
		{[]string{"graph", "skip", "issue-1", "--set", ""}, []string{"review-chain", "spec-chain"}},
		{[]string{"graph", "status", "-w", "issue-2"}, []string{"issue-239"}},
		{[]string{"graph", "show", "--format", ""}, []string{"dot", "json", "mermaid", "text"}},
		{[]string{"graph", "show", "--loop", "pdlc-p"}, []string{"pdlc-pr-loop"}},
		{[]string{"check", "--repo", repo, "issue-"}, []string{"issue-1", "issue-239"}},
		{[]string{"check", "--graph", ""}, nil},
		{[]string{"completion", ""}, []string{"bash", "fish", "zsh"}},
		{[]string{"help", "graph", "c"}, []string{"complete"}},
		{[]string{"events", "--w"}, []string{"--work-item"}},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.words, " "), func(t *testing.T) {
			io.reset()
			require.Equal(t, exitOK, Main(append([]string{"loopctl", "__complete"}, tc.words...), f))
			got := strings.Fields(io.out.String())
			sort.Strings(got)
			if tc.want == nil {
				require.Empty(t, got)
			} else {
				require.Equal(t, tc.want, got)
			}
			require.Empty(t, io.err.String())
		})
	}
}

// Item 9, the real shells: bash, zsh and fish run the scripts loopctl
// prints against the built binary.
func TestNewcomerCompletionInRealShells(t *testing.T) {
	repo := gitRepo(t)
	bin, _ := builtBinaries(t)
	path := filepath.Dir(bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	script := func(shell string) string {
		out, err := exec.Command(bin, "completion", shell).Output()
		require.NoError(t, err)
		p := filepath.Join(t.TempDir(), "loopctl."+shell)
		require.NoError(t, os.WriteFile(p, out, 0o644))
		return p
	}
	run := func(t *testing.T, name string, args ...string) []string {
		cmd := exec.Command(name, args...)
		cmd.Dir = repo
		cmd.Env = append(os.Environ(), "PATH="+path, "HOME="+t.TempDir())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		got := strings.Fields(string(out))
		sort.Strings(got)
		return got
	}
	// words typed so far, the cursor at the end of the last one.
	cases := []struct {
		line []string
		want []string
	}{
		{[]string{"loopctl", "gr"}, []string{"graph"}},
		{[]string{"loopctl", "check", "issue-2"}, []string{"issue-239"}},
		{[]string{"loopctl", "check", "issue-1", "--recom"}, []string{"--recompute"}},
		{[]string{"loopctl", "graph", "skip", "issue-1", "--set", "rev"}, []string{"review-chain"}},
	}
	t.Run("bash", func(t *testing.T) {
		if _, err := exec.LookPath("bash"); err != nil {
			t.Skip("bash is not installed")
		}
		src := script("bash")
		for _, tc := range cases {
			words := make([]string, len(tc.line))
			for i, w := range tc.line {
				words[i] = "'" + w + "'"
			}
			prog := "source " + src + "; COMP_WORDS=(" + strings.Join(words, " ") + "); COMP_CWORD=" + strconv.Itoa(len(tc.line)-1) + "; _loopctl_complete; printf '%s\\n' \"${COMPREPLY[@]}\""
			require.Equal(t, tc.want, run(t, "bash", "-c", prog), strings.Join(tc.line, " "))
		}
	})
	t.Run("zsh", func(t *testing.T) {
		if _, err := exec.LookPath("zsh"); err != nil {
			t.Skip("zsh is not installed")
		}
		src := script("zsh")
		for _, tc := range cases {
			words := make([]string, len(tc.line))
			for i, w := range tc.line {
				words[i] = "'" + w + "'"
			}
			// compadd and compdef exist only inside the completion system;
			// stand-ins print what the function offers (zsh filters by
			// prefix itself, so the test does too).
			prog := `compdef() { :; }; _files() { print FILES; }; compadd() { [[ $1 == -a ]] && print -l -- ${(P)2}; }; source ` + src +
				`; words=(` + strings.Join(words, " ") + `); CURRENT=` + strconv.Itoa(len(tc.line)) + `; _loopctl | grep -- "^${words[CURRENT]}" || true`
			require.Equal(t, tc.want, run(t, "zsh", "-f", "-c", prog), strings.Join(tc.line, " "))
		}
	})
	t.Run("fish", func(t *testing.T) {
		if _, err := exec.LookPath("fish"); err != nil {
			t.Skip("fish is not installed")
		}
		src := script("fish")
		for _, tc := range cases {
			prog := "source " + src + "; complete -C'" + strings.Join(tc.line, " ") + "'"
			got := run(t, "fish", "--no-config", "-c", prog)
			require.Equal(t, tc.want, got, strings.Join(tc.line, " "))
		}
	})
}

// One output vocabulary: --jq and --template over every verb's JSON.
func TestNewcomerJQAndTemplate(t *testing.T) {
	repo := gitRepo(t)
	f, io := plainFactory(t, repo)
	cases := []struct {
		argv []string
		code int
		out  string
		err  string
	}{
		{[]string{"check", "issue-239", "--recompute", "--jq", ".currentNode"}, exitFailed, "phase-selection\n", ""},
		{[]string{"check", "--all", "--recompute", "-q", "[.[].workItem] | join(\",\")"}, exitFailed, "issue-1,issue-239\n", ""},
		{[]string{"check", "issue-239", "--recompute", "--template", "{{.workItem}} at {{.currentNode}}\n"}, exitFailed, "issue-239 at phase-selection\n", ""},
		{[]string{"check", "issue-239", "--template", "{{join \" \" (pluck \"node\" .nodes) | truncate 20}}"}, exitFailed, "phase-selection bra…", ""},
		{[]string{"graph", "status", "issue-239", "--jq", ".ok"}, exitFailed, "false\n", ""},
		{[]string{"graph", "complete", "issue-239", "--jq", ".reason"}, exitOK, "not-started\n", ""},
		{[]string{"graph", "hooks", "--jq", "map(select(.name == \"set-phase-label\")) | .[0].needs[0]"}, exitOK, "github.set-labels\n", ""},
		{[]string{"graph", "verify", "--loop", "pdlc-pr-loop", "--jq", ".[0].graph"}, exitOK, "pdlc-pr-loop\n", ""},
		{[]string{"graph", "skip", "issue-239", "--set", "review-chain", "--reason", "docs", "--jq", ".declared | length"}, exitOK, "6\n", ""},
		{[]string{"graph", "force", "issue-239", "--to", "design", "--reason", "r", "--jq", ".toNode"}, exitOK, "design\n", "not a declared edge"},
		{[]string{"check", "issue-239", "--format", "table", "--jq", ".ok"}, exitRefused, "", "drop --format table"},
		{[]string{"check", "issue-239", "--jq", ".ok", "--template", "x"}, exitRefused, "", "not both"},
		{[]string{"check", "issue-239", "--jq", ".[[["}, exitRefused, "", "--jq"},
		{[]string{"check", "issue-239", "--template", "{{.nope"}, exitRefused, "", "--template"},
	}
	for _, tc := range cases {
		t.Run(strings.Join(tc.argv, " "), func(t *testing.T) {
			io.reset()
			require.Equal(t, tc.code, Main(append([]string{"loopctl"}, tc.argv...), f), io.err.String())
			require.Equal(t, tc.out, io.out.String())
			if tc.err != "" {
				require.Contains(t, io.err.String(), tc.err)
			}
		})
	}
}

// Item 14: a table written anywhere but a terminal keeps DETAIL whole.
func TestNewcomerDetailIsNotCutOutsideATerminal(t *testing.T) {
	require.Equal(t, 0, detailWidth(&bytes.Buffer{}))
	long := strings.Repeat("word ", 100)
	require.Equal(t, strings.TrimSpace(long), strings.TrimSpace(oneLineN(long, detailWidth(&bytes.Buffer{}))))
	require.Equal(t, "line one line two", oneLine("line one\nline two"))
	require.Equal(t, "abcdefghi…", oneLineN("abcdefghijkl", 10))
	require.Len(t, []rune(oneLine(strings.Repeat("x", 5000))), maxDetail)
}

// The README's "Using it" commands, run as written in a fresh repository
// holding issue-42: none is bad usage, none panics, none writes outside the
// repository's own places.
func TestNewcomerReadmeCommands(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	require.NoError(t, err)
	_, block, ok := strings.Cut(string(readme), "## Using it\n\n```sh\n")
	require.True(t, ok, "README has a 'Using it' block")
	block, _, _ = strings.Cut(block, "```")
	repo := gitRepo(t)
	write(t, repo, "docs/specs/issue-42/requirements.md", "# R\n\n## Requirements\n\n1. x\n\n## Security considerations\n\nnone\n")
	f, io := plainFactory(t, filepath.Join(repo, "docs"))
	ran := 0
	for _, line := range strings.Split(block, "\n") {
		if !strings.HasPrefix(line, "loopctl ") {
			continue
		}
		if i := strings.Index(line, "  #"); i >= 0 {
			line = line[:i]
		}
		argv := shellWords(line)
		t.Run(strings.Join(argv[1:], " "), func(t *testing.T) {
			io.reset()
			code := Main(argv, f)
			require.Contains(t, []int{exitOK, exitFailed}, code, "stderr: %s", io.err.String())
			require.NotContains(t, io.err.String(), "panic")
			require.NotContains(t, io.err.String(), "unknown")
		})
		ran++
	}
	require.GreaterOrEqual(t, ran, 10)
	for _, stray := range []string{"docs/.the-loop", "docs/docs", ".claude/.claude"} {
		_, err := os.Stat(filepath.Join(repo, filepath.FromSlash(stray)))
		require.ErrorIs(t, err, fs.ErrNotExist, stray)
	}
}

// shellWords splits a README command line: spaces separate words, double
// quotes group them.
func shellWords(s string) []string {
	var out []string
	var cur strings.Builder
	inQuote, have := false, false
	for _, r := range s {
		switch {
		case r == '"':
			inQuote, have = !inQuote, true
		case r == ' ' && !inQuote:
			if have {
				out = append(out, cur.String())
				cur.Reset()
				have = false
			}
		default:
			cur.WriteRune(r)
			have = true
		}
	}
	if have {
		out = append(out, cur.String())
	}
	return out
}

// A harness still registered with `loopctl mcp` is told where the server
// went, with exit 2, rather than "no such command".
func TestMCPMovedToLoopd(t *testing.T) {
	f, io := testFactory(t, t.TempDir(), nil)
	require.Equal(t, exitRefused, Main([]string{"loopctl", "mcp", "--config", "x"}, f))
	require.Contains(t, io.err.String(), "loopd mcp")
	require.Contains(t, io.err.String(), `"args": ["mcp"]`)
}
