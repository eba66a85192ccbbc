package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/sessions"
)

// The daemon hosts every harness sessions has an adapter for: Claude Code
// (the default), cursor-agent, the Codex CLI and the Gemini CLI. Which one
// a work item's session runs is, first to answer: the label "the-loop:
// harness-<name>" on the item, routing.harnessByRepository for its
// repository, routing.defaultHarness. Every one
// runs through the same launcher and sandbox (allowlisted environment,
// Landlock) as Claude Code.

// harnessLabelPrefix is the label that picks a work item's harness.
const harnessLabelPrefix = "the-loop: harness-"

// harnesses are the harnesses loopd hosts, as its settings configure them
// (routing.defaultHarness, harnessArgs, harnessByRepository, harnessTrust:
// all need a restart, so they hold still), and where their programs are
// found.
type harnesses struct {
	cfg  *Config
	path searchPath
	// env reads loopd's environment (Deps.Env; nil: none is read).
	env func(string) (string, bool)
	// versions caches the harnesses' versions for status.
	versions harnessVersions
}

// adapters are the adapters the Manager gets, claude first, then any
// other registered harness (package harness) with no extra arguments.
func (d *harnesses) adapters(claude *sessions.ClaudeCode) []sessions.Harness {
	out := []sessions.Harness{
		claude,
		&sessions.Cursor{Args: d.cfg.Routing.HarnessArgs.Cursor},
		&sessions.Codex{Args: d.cfg.Routing.HarnessArgs.Codex},
		&sessions.Gemini{Args: d.cfg.Routing.HarnessArgs.Gemini, TrustedFolders: d.geminiTrustedFolders()},
	}
	for _, h := range harness.All() {
		if !slices.ContainsFunc(out, func(a sessions.Harness) bool { return a.Name() == h.Name }) {
			out = append(out, sessions.NewAdapter(h.Name, nil))
		}
	}
	return out
}

// geminiTrustedFolders is the trusted-folders file in which the Gemini
// sessions' checkouts are marked trusted: GeminiTrustedFolders when set,
// else — as for Claude Code's trust, when ClaudeEnv is nil and
// routing.harnessTrust is on — the one the Gemini CLI reads for loopd's
// user; "" otherwise (nothing is written).
func (d *harnesses) geminiTrustedFolders() string {
	if d.cfg.GeminiTrustedFolders != "" {
		return d.cfg.GeminiTrustedFolders
	}
	if d.cfg.ClaudeEnv != nil || !d.cfg.Routing.HarnessTrust.Enabled || d.env == nil {
		return ""
	}
	home, _ := os.UserHomeDir()
	return sessions.GeminiTrustedFoldersFile(func(k string) string { v, _ := d.env(k); return v }, home)
}

// harnessBinaries maps a harness name to the program it runs.
var harnessBinaries = map[string]string{}

func init() {
	for _, h := range (&harnesses{cfg: &Config{}}).adapters(&sessions.ClaudeCode{}) {
		harnessBinaries[h.Name()] = h.Binary()
	}
}

// forEvent is the harness for the event's work item: its label's, else
// its repository's (routing.harnessByRepository), else "" (the default).
func (d *harnesses) forEvent(ev *ingress.Event) string {
	if h := harnessFor(ev); h != "" {
		return h
	}
	if ev != nil {
		return d.cfg.Routing.HarnessByRepository[strings.ToLower(ev.Repo)]
	}
	return ""
}

// checkDefault refuses to start when routing.defaultHarness names
// a harness other than claude whose program is not on the PATH loopd
// hands its sessions: the operator chose it, and every spawn would fail.
// A missing claude (the default, which the demo and a daemon that only
// records events run without) is a warning in status instead
// (defaultWarning).
func (d *harnesses) checkDefault() error {
	bin, ok := harnessBinaries[d.cfg.Routing.DefaultHarness]
	if !ok {
		return fmt.Errorf("routing.defaultHarness: %q has no adapter; use %s", d.cfg.Routing.DefaultHarness, harness.List(harness.Names()))
	}
	if d.cfg.Routing.DefaultHarness != harness.Default().Name {
		if _, err := d.path.lookPath(bin); err != nil {
			return fmt.Errorf("routing.defaultHarness: %s runs %s, which is not on loopd's PATH (%v); install it or set routing.defaultHarness to a harness that is installed", d.cfg.Routing.DefaultHarness, bin, err)
		}
	}
	for _, repo := range slices.Sorted(maps.Keys(d.cfg.Routing.HarnessByRepository)) {
		name := d.cfg.Routing.HarnessByRepository[repo]
		bin, ok := harnessBinaries[name]
		if !ok {
			return fmt.Errorf("routing.harnessByRepository.%s: %q has no adapter; use %s", repo, name, harness.List(harness.Names()))
		}
		if name == harness.Default().Name {
			continue
		}
		if _, err := d.path.lookPath(bin); err != nil {
			return fmt.Errorf("routing.harnessByRepository.%s: %s runs %s, which is not on loopd's PATH (%v); install it or remove the entry", repo, name, bin, err)
		}
	}
	return nil
}

// defaultWarning is what status says when the default harness's
// program is missing ("" when it is there).
func (d *harnesses) defaultWarning() string {
	bin := harnessBinaries[d.cfg.Routing.DefaultHarness]
	if _, err := d.path.lookPath(bin); err != nil {
		return fmt.Sprintf("routing.defaultHarness %s: %s is not on loopd's PATH; sessions cannot start until it is installed", d.cfg.Routing.DefaultHarness, bin)
	}
	return ""
}

// executables are the programs of every harness found on PATH, for
// the sandbox's read+execute grants (a label may pick any of them).
func (d *harnesses) executables() []string {
	var out []string
	for _, h := range d.adapters(&sessions.ClaudeCode{}) {
		if p, err := d.path.lookPath(h.Binary()); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// harnessFor is the harness a work item's event asks for: the name in a
// "the-loop: harness-<name>" label the event's issue or pull request
// carries, when loopd has that adapter; "" (the default) otherwise.
func harnessFor(ev *ingress.Event) string {
	if ev == nil {
		return ""
	}
	for _, l := range eventLabels(ev.Payload) {
		if name, ok := strings.CutPrefix(strings.ToLower(strings.TrimSpace(l)), harnessLabelPrefix); ok {
			if _, known := harnessBinaries[name]; known {
				return name
			}
		}
	}
	return ""
}

// eventLabels are the label names of a GitHub payload's issue or pull
// request, and the label just added. The payload is untrusted: a shape
// it does not have yields nothing, never an error.
func eventLabels(payload json.RawMessage) []string {
	if len(payload) == 0 || len(payload) > 4<<20 {
		return nil
	}
	type label struct {
		Name string `json:"name"`
	}
	type labeled struct {
		Labels []label `json:"labels"`
	}
	var p struct {
		Issue       *labeled `json:"issue"`
		PullRequest *labeled `json:"pull_request"`
		Label       *label   `json:"label"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return nil
	}
	var out []string
	for _, x := range []*labeled{p.Issue, p.PullRequest} {
		if x == nil {
			continue
		}
		for _, l := range x.Labels {
			out = append(out, l.Name)
		}
	}
	if p.Label != nil {
		out = append(out, p.Label.Name)
	}
	return out
}

// harnessVersions asks each installed harness for its version once
// (`<binary> --version`, 10 s at most) for loopctl daemon status.
type harnessVersions struct {
	once sync.Once
	list []api.HarnessView
}

func (d *harnesses) views(ctx context.Context) []api.HarnessView {
	d.versions.once.Do(func() {
		for _, h := range d.adapters(&sessions.ClaudeCode{}) {
			v := api.HarnessView{Name: h.Name(), Binary: h.Binary(), Default: h.Name() == d.cfg.Routing.DefaultHarness}
			p, err := d.path.lookPath(h.Binary())
			if err != nil {
				v.Version = "not on PATH"
				d.versions.list = append(d.versions.list, v)
				continue
			}
			v.Path = p
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			out, err := exec.CommandContext(cctx, p, "--version").Output()
			cancel()
			switch {
			case err != nil && errors.Is(cctx.Err(), context.DeadlineExceeded):
				v.Version = "unknown (--version timed out)"
			case err != nil:
				v.Version = fmt.Sprintf("unknown (--version: %v)", err)
			default:
				v.Version = firstLine(string(out))
			}
			d.versions.list = append(d.versions.list, v)
		}
	})
	return d.versions.list
}

func firstLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		s = s[:i]
	}
	if len(s) > 120 {
		s = s[:120]
	}
	return s
}

// claudeConfigDir is Claude Code's configuration directory for loopd's
// sessions (where its transcripts are).
func (d *harnesses) claudeConfigDir() string {
	if d.cfg.ClaudeEnv != nil {
		return d.cfg.ClaudeEnv.ConfigDir
	}
	home, _ := os.UserHomeDir()
	getenv := func(k string) string { v, _ := d.env(k); return v }
	return sessions.ClaudeEnvironmentFromEnv(getenv, home, d.cfg.Routing.WorkspaceRoot).ConfigDir
}
