package harness_test

// A stand-in fifth harness, registered from this file only, to show that
// adding a harness is one descriptor: sessions runs it, loop-gate answers
// it, loopctl install lays it out, the settings and the critics accept its
// name — with no other file naming it.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/stopgate"
	"github.com/theloop-dev/theloop/plugin"
	"github.com/theloop-dev/theloop/plugin/install"
	"github.com/theloop-dev/theloop/sessions"
)

var acme = &harness.Descriptor{
	Name:   "acme",
	Title:  "Acme Agent",
	Binary: "acme-agent",
	Order:  50,
	Spawn:  func(id string) []string { return []string{"--conversation", id} },
	Resume: func(id string) []string { return []string{"--continue", id} },
	OneShot: func(_, model string, extra []string) ([]string, bool) {
		args := append([]string{"ask", "--json"}, extra...)
		if model != "" {
			args = append(args, "--model", model)
		}
		return args, true
	},
	Gate: harness.Gate{
		Event: "turnEnd",
		Block: func(reason string) any {
			return struct {
				Continue bool   `json:"continue"`
				Message  string `json:"message"`
			}{true, reason}
		},
	},
	Install: harness.Install{Style: harness.InstallHookFile, HookFile: ".acme/hooks.json"},
	Egress:  []string{"api.acme.test"},
}

func init() { harness.Register(acme) }

func TestStandInIsRegistered(t *testing.T) {
	require.Same(t, acme, harness.ByName("acme"))
	require.Equal(t, []string{"claude", "cursor", "codex", "gemini", "acme"}, harness.Names())
	require.Equal(t, "claude", harness.Default().Name)
}

func TestSessionsRunTheStandIn(t *testing.T) {
	a := sessions.NewAdapter("acme", []string{"--quiet"})
	require.NotNil(t, a)
	var h sessions.Harness = a
	require.Equal(t, "acme", h.Name())
	require.Equal(t, "acme-agent", h.Binary())

	argv, err := h.Interactive("s-1")
	require.NoError(t, err)
	require.Equal(t, []string{"--conversation", "s-1", "--quiet"}, argv)
	argv, err = h.Resume("s-1")
	require.NoError(t, err)
	require.Equal(t, []string{"--continue", "s-1", "--quiet"}, argv)
	_, err = h.Resume("../x")
	require.ErrorIs(t, err, sessions.ErrInvalidName)

	cmd, err := h.OneShot("review this", "big")
	require.NoError(t, err)
	require.Equal(t, "acme-agent", cmd.Name)
	require.Equal(t, []string{"ask", "--json", "--quiet", "--model", "big"}, cmd.Args)
	require.Equal(t, "review this", string(cmd.Stdin))
	_, err = h.OneShot("x", "--evil")
	require.ErrorIs(t, err, sessions.ErrUnsafeArgument)

	p, err := h.PrepareEnvironment(t.TempDir())
	require.NoError(t, err)
	require.Equal(t, sessions.Prepared{}, p)

	// An operator's argument that would end a tmux command is refused as
	// for every harness.
	_, err = (&sessions.Adapter{Desc: acme, Args: []string{"x;"}}).Interactive("s-1")
	require.Error(t, err)
}

func TestLoopGateAnswersTheStandIn(t *testing.T) {
	h, err := stopgate.ParseHarness("acme")
	require.NoError(t, err)
	_, err = stopgate.ParseHarness("acme2")
	require.ErrorContains(t, err, "pass claude, cursor, codex, gemini or acme")

	root := t.TempDir()
	require.NoError(t, os.Mkdir(filepath.Join(root, ".git"), 0o755))
	var out, errOut bytes.Buffer
	code := stopgate.Run(context.Background(), stopgate.Options{
		Harness:  h,
		Stdin:    strings.NewReader(`{"cwd":` + quote(root) + `}`),
		Stdout:   &out,
		Stderr:   &errOut,
		Getenv:   func(k string) string { return map[string]string{stopgate.WorkItemEnv: "issue-9"}[k] },
		Getwd:    func() (string, error) { return "", errors.New("no cwd in tests") },
		Counters: stopgate.Counters{Dir: filepath.Join(t.TempDir(), "gate")},
		Lookup:   func(string) (stopgate.Session, error) { return stopgate.Session{}, stopgate.ErrNoSession },
		Check: func(context.Context, string, string) (*graph.Report, error) {
			return &graph.Report{WorkItem: "issue-9", CurrentNode: "design", Nodes: []graph.NodeReport{
				{Node: "design", Status: "block", Messages: []string{"write the design"}},
			}}, nil
		},
	})
	require.Equal(t, 0, code, errOut.String())
	var answer struct {
		Continue bool   `json:"continue"`
		Message  string `json:"message"`
	}
	require.NoError(t, json.Unmarshal(out.Bytes(), &answer), out.String())
	require.True(t, answer.Continue)
	require.Contains(t, answer.Message, "issue-9 is at node `design`")
}

func TestInstallLaysOutTheStandIn(t *testing.T) {
	home := t.TempDir()
	env := &install.Env{
		Getenv:  func(string) string { return "" },
		Getwd:   func() (string, error) { return home, nil },
		HomeDir: func() (string, error) { return home, nil },
	}
	var out, errOut bytes.Buffer
	opts := &install.Options{IO: install.IOStreams{Out: &out, ErrOut: &errOut}, Env: env, Harness: "acme", Scope: "user", Command: "loop-gate"}
	require.NoError(t, opts.CheckFlags("install", true))
	require.NoError(t, install.Install(opts), errOut.String())

	data, err := os.ReadFile(filepath.Join(home, ".acme", "hooks.json"))
	require.NoError(t, err)
	var file struct {
		Version int `json:"version"`
		Hooks   map[string][]struct {
			Command string `json:"command"`
		} `json:"hooks"`
	}
	require.NoError(t, json.Unmarshal(data, &file), string(data))
	require.Equal(t, 1, file.Version)
	require.Len(t, file.Hooks["turnEnd"], 1)
	require.Equal(t, plugin.GateCommand("loop-gate", "acme"), file.Hooks["turnEnd"][0].Command)
	require.Contains(t, install.Installed(env), "acme")

	out.Reset()
	require.NoError(t, install.Uninstall(opts), errOut.String())
	require.NotContains(t, install.Installed(env), "acme")

	bad := &install.Options{IO: opts.IO, Env: env, Harness: "acme2", Scope: "user", Command: "loop-gate"}
	require.ErrorContains(t, bad.CheckFlags("install", true), "--harness must be claude, cursor, codex, gemini or acme")
}

func TestSettingsAndCriticsAcceptTheStandIn(t *testing.T) {
	cfg, err := loop.ParseCLIConfig("cli-config.yaml", []byte("version: "+loop.CurrentCLIConfigVersion+`
routing:
  defaultHarness: acme
  harnessByRepository:
    octo/x: acme
`))
	require.NoError(t, err)
	require.Equal(t, "acme", cfg.Settings.Routing.DefaultHarness)
	require.Equal(t, map[string]string{"octo/x": "acme"}, cfg.Settings.Routing.HarnessByRepository)

	_, err = loop.ParseCLIConfig("cli-config.yaml", []byte("version: "+loop.CurrentCLIConfigVersion+"\nrouting:\n  defaultHarness: acme2\n"))
	require.ErrorContains(t, err, `routing.defaultHarness: "acme2" is not one of claude, cursor, codex, gemini, acme`)

	critics, warns := loop.Critics(loop.HarnessConfig{Raw: map[string]any{"reviews": map[string]any{"critics": map[string]any{
		"sharp": map[string]any{"harness": "acme", "model": "big"},
	}}}})
	require.Empty(t, warns)
	require.Len(t, critics, 1)
	require.Equal(t, "acme", critics[0].Harness)
}

func quote(s string) string { b, _ := json.Marshal(s); return string(b) }
