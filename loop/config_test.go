package loop

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func writeRepoFile(t *testing.T, repo, rel, content string) {
	t.Helper()
	p := filepath.Join(repo, filepath.FromSlash(rel))
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func TestLoadHarnessConfigDefaultsWithoutAFile(t *testing.T) {
	cfg, warnings, err := LoadHarnessConfig(t.TempDir())
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.False(t, cfg.Present)
	assert.Equal(t, "docs/specs", cfg.SpecDir)
	assert.Equal(t, "loop:", cfg.PhaseLabelPrefix)
	assert.Equal(t, "", cfg.OriginRepo())
	assert.True(t, cfg.Notifications.Enabled)
	assert.Nil(t, cfg.Notifications.Roles("phase-approval-pending"))
}

func TestLoadHarnessConfigFilesAndFallback(t *testing.T) {
	const full = `version: "0.2.0"
ticketing:
  system: github
  github: {owner: octo, repo: app}
workflow:
  specDir: ./specs/items/
  phaseLabelPrefix: "phase/"
  phases: [not-started, design, complete]
notifications:
  enabled: true
  events:
    phase-approval-pending: [approver]
    pr-review-pending: [reviewer, approver]
    work-item-complete:
`
	t.Run("harness-config.yaml", func(t *testing.T) {
		repo := t.TempDir()
		writeRepoFile(t, repo, HarnessConfigFile, full)
		writeRepoFile(t, repo, LegacyHarnessConfigFile, "workflow: {specDir: legacy}\n")
		cfg, warnings, err := LoadHarnessConfig(repo)
		require.NoError(t, err)
		assert.Empty(t, warnings)
		assert.True(t, cfg.Present)
		assert.Equal(t, HarnessConfigFile, cfg.Path)
		assert.Equal(t, "specs/items", cfg.SpecDir, "cleaned; harness-config.yaml wins over the legacy file")
		assert.Equal(t, "phase/", cfg.PhaseLabelPrefix)
		assert.Equal(t, []string{"not-started", "design", "complete"}, cfg.Phases)
		assert.Equal(t, "octo/app", cfg.OriginRepo())
		assert.Equal(t, []string{"reviewer", "approver"}, cfg.Notifications.Roles("pr-review-pending"))
		assert.Nil(t, cfg.Notifications.Roles("work-item-complete"))
		assert.Equal(t, "github", cfg.Raw["ticketing"].(map[string]any)["system"])
	})
	t.Run("legacy config.yaml", func(t *testing.T) {
		repo := t.TempDir()
		writeRepoFile(t, repo, LegacyHarnessConfigFile, "workflow: {specDir: legacy/specs}\n")
		cfg, _, err := LoadHarnessConfig(repo)
		require.NoError(t, err)
		assert.True(t, cfg.Present)
		assert.Equal(t, LegacyHarnessConfigFile, cfg.Path)
		assert.Equal(t, "legacy/specs", cfg.SpecDir)
	})
	t.Run("notifications disabled", func(t *testing.T) {
		cfg, _, err := ParseHarnessConfig("h.yaml", []byte("notifications:\n  enabled: false\n  events: {decision-pending: [approver]}\n"))
		require.NoError(t, err)
		assert.Nil(t, cfg.Notifications.Roles("decision-pending"))
		assert.Equal(t, []string{"approver"}, cfg.Notifications.Events["decision-pending"])
	})
}

func TestHarnessConfigIsBestEffort(t *testing.T) {
	cases := []struct {
		name     string
		yaml     string
		warnings []string // substrings, one per expected warning, in order
		check    func(t *testing.T, cfg HarnessConfig)
	}{
		{
			name:     "unparseable",
			yaml:     "workflow:\n  specDir: [docs\n",
			warnings: []string{"h.yaml: not valid YAML: [2:"},
			check: func(t *testing.T, cfg HarnessConfig) {
				assert.Equal(t, DefaultSpecDir, cfg.SpecDir)
				assert.Empty(t, cfg.Raw)
			},
		},
		{
			name:     "not a mapping",
			yaml:     "- a\n- b\n",
			warnings: []string{"must be a YAML mapping"},
		},
		{
			name:     "scalar where a mapping belongs",
			yaml:     "workflow: docs\n",
			warnings: []string{"h.yaml: workflow: expected a mapping, got a string"},
			check: func(t *testing.T, cfg HarnessConfig) {
				assert.Equal(t, DefaultSpecDir, cfg.SpecDir)
				assert.Equal(t, DefaultPhaseLabelPrefix, cfg.PhaseLabelPrefix)
			},
		},
		{
			name: "wrong types",
			yaml: "workflow:\n  specDir: 12\n  phaseLabelPrefix: true\n  phases: design\nticketing:\n  github:\n    owner: [a]\n    repo: app\nnotifications:\n  enabled: yes-please\n  events:\n    decision-pending: approver\n    pr-review-pending: [1, 2]\n",
			warnings: []string{
				"workflow.specDir: expected a string, got a number",
				"workflow.phaseLabelPrefix: expected a string, got a boolean",
				"workflow.phases: expected a list of strings, got a string",
				"ticketing.github.owner: expected a string, got a list",
				"notifications.enabled: expected true or false, got a string",
				"notifications.events.decision-pending: expected a list of strings, got a string",
				"notifications.events.pr-review-pending[0]: expected a string, got a number",
			},
			check: func(t *testing.T, cfg HarnessConfig) {
				assert.Equal(t, DefaultSpecDir, cfg.SpecDir)
				assert.Equal(t, "", cfg.OriginRepo())
				assert.True(t, cfg.Notifications.Enabled)
				assert.Empty(t, cfg.Notifications.Events)
			},
		},
		{
			name:     "invalid owner",
			yaml:     "ticketing: {github: {owner: 'octo cat', repo: app}}\n",
			warnings: []string{`"octo cat"/"app" is not a repository name`},
			check: func(t *testing.T, cfg HarnessConfig) {
				assert.Equal(t, "", cfg.OriginRepo())
			},
		},
		{
			name:     "half a repository",
			yaml:     "ticketing: {github: {owner: octo}}\n",
			warnings: []string{`"octo"/"" is not a repository name`},
		},
		{
			name:     "empty label prefix",
			yaml:     "workflow: {phaseLabelPrefix: ''}\n",
			warnings: []string{"workflow.phaseLabelPrefix: is empty"},
		},
		{
			name:     "repository hooks",
			yaml:     "graph:\n  hooks:\n    x-deploy: scripts/deploy.py\n",
			warnings: []string{"graph.hooks: repository hooks are never run"},
		},
		{
			name: "nulls are absent",
			yaml: "workflow:\n  specDir:\n  phases:\nnotifications:\n",
		},
		{
			name: "empty file",
			yaml: "",
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, warnings, err := ParseHarnessConfig("h.yaml", []byte(tc.yaml))
			require.NoError(t, err, "a repository's harness config never stops theloop, except an unsafe specDir")
			require.Len(t, warnings, len(tc.warnings), "warnings: %q", warnings)
			for i, w := range tc.warnings {
				assert.Contains(t, warnings[i], w)
				assert.True(t, strings.HasPrefix(warnings[i], "h.yaml"), "warnings name the file: %q", warnings[i])
			}
			if tc.check != nil {
				tc.check(t, cfg)
			}
		})
	}
}

func TestHarnessConfigRefusesSpecDirOutsideTheRepository(t *testing.T) {
	for _, dir := range []string{"/etc", "..", "../other/specs", "docs/../../x", ".", "./"} {
		t.Run(dir, func(t *testing.T) {
			repo := t.TempDir()
			writeRepoFile(t, repo, HarnessConfigFile, "workflow:\n  specDir: '"+dir+"'\n")
			_, _, err := LoadHarnessConfig(repo)
			require.ErrorIs(t, err, ErrUnsafePath)
			assert.Contains(t, err.Error(), "workflow.specDir")
			assert.Contains(t, err.Error(), HarnessConfigFile)
		})
	}
	for _, ok := range []string{"docs/specs", "specs", "a/../b", "./x/"} {
		assert.NoError(t, ValidateSpecDir("workflow.specDir", ok), ok)
	}
}

func TestHarnessConfigUnreadableFileWarns(t *testing.T) {
	repo := t.TempDir()
	// A directory where the file belongs cannot be read.
	require.NoError(t, os.MkdirAll(filepath.Join(repo, HarnessConfigFile), 0o755))
	cfg, warnings, err := LoadHarnessConfig(repo)
	require.NoError(t, err)
	assert.True(t, cfg.Present)
	assert.Equal(t, DefaultSpecDir, cfg.SpecDir)
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], HarnessConfigFile+" could not be read")
}

func TestHarnessConfigRefusesAliasBombs(t *testing.T) {
	bomb := func(indent string) string {
		var b strings.Builder
		b.WriteString(indent + "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n")
		for i := 1; i < 8; i++ {
			name, prev := "a"+string(rune('0'+i)), "*a"+string(rune('0'+i-1))
			b.WriteString(indent + name + ": &" + name + " [" + strings.Repeat(prev+", ", 9) + prev + "]\n")
		}
		return b.String()
	}
	// Inside a block theloop reads: refused.
	cfg, warnings, err := ParseHarnessConfig("bomb.yaml", []byte("notifications:\n"+bomb("  ")))
	require.NoError(t, err)
	require.Len(t, warnings, 1)
	assert.Contains(t, warnings[0], "anchors and aliases")
	assert.Empty(t, cfg.Raw, "nothing of the file is handed on")

	// Elsewhere: never parsed at all, and the settings theloop reads apply.
	cfg, warnings, err = ParseHarnessConfig("bomb.yaml", []byte(bomb("")+"workflow:\n  specDir: specs\n"))
	require.NoError(t, err)
	assert.Empty(t, warnings)
	assert.Equal(t, "specs", cfg.SpecDir)
}

func TestRepoGraphWarnings(t *testing.T) {
	repo := t.TempDir()
	assert.Empty(t, RepoGraphWarnings(repo))
	for _, f := range []string{".the-loop/graph.yaml", ".the-loop/pdlc.yaml", ".the-loop/pdlc-pr-loop.yaml", ".the-loop/pdlc-work-item-loop.yml", ".the-loop/notes.yaml", HarnessConfigFile} {
		writeRepoFile(t, repo, f, "nodes: []\n")
	}
	warnings := RepoGraphWarnings(repo)
	require.Len(t, warnings, 4)
	for i, f := range []string{".the-loop/graph.yaml", ".the-loop/pdlc.yaml", ".the-loop/pdlc-work-item-loop.yml", ".the-loop/pdlc-pr-loop.yaml"} {
		assert.Contains(t, warnings[i], f+" is ignored")
		assert.Contains(t, warnings[i], "future feature")
	}
}

// --- CLI config -------------------------------------------------------------

// cliEnv builds a CLIConfigSource over temporary directories.
type cliEnv struct {
	work, home string
	env        map[string]string
}

func newCLIEnv(t *testing.T) *cliEnv {
	return &cliEnv{work: t.TempDir(), home: t.TempDir(), env: map[string]string{}}
}

func (e *cliEnv) source(explicit string) CLIConfigSource {
	return CLIConfigSource{
		Path:      explicit,
		LookupEnv: func(k string) (string, bool) { v, ok := e.env[k]; return v, ok },
		HomeDir:   func() (string, error) { return e.home, nil },
		WorkDir:   e.work,
	}
}

func TestCLIConfigResolutionOrder(t *testing.T) {
	e := newCLIEnv(t)
	explicit := filepath.Join(t.TempDir(), "explicit.yaml")
	fromEnv := filepath.Join(t.TempDir(), "env.yaml")
	local := filepath.Join(e.work, ".the-loop", "cli-config.yaml")
	home := filepath.Join(e.home, ".the-loop", "cli-config.yaml")
	for p, root := range map[string]string{explicit: "explicit", fromEnv: "env", local: "local", home: "home"} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte("state: {root: "+root+"}\n"), 0o644))
	}
	e.env[CLIConfigEnv] = fromEnv

	steps := []struct {
		name     string
		explicit string
		remove   string // file removed after this step
		want     string
	}{
		{"explicit path first", explicit, "", "explicit"},
		{"then $THE_LOOP_CLI_CONFIG", "", "", "env"},
		{"then ./.the-loop/cli-config.yaml", "", local, "local"},
		{"then ~/.the-loop/cli-config.yaml", "", home, "home"},
		{"then defaults", "", "", DefaultStateRoot},
	}
	for i, s := range steps {
		if i == 2 {
			delete(e.env, CLIConfigEnv)
		}
		cfg, err := LoadCLIConfig(e.source(s.explicit))
		require.NoError(t, err, s.name)
		assert.Equal(t, s.want, cfg.StateRoot, s.name)
		if s.remove != "" {
			require.NoError(t, os.Remove(s.remove))
		}
	}
	cfg, err := LoadCLIConfig(e.source(""))
	require.NoError(t, err)
	assert.Equal(t, DefaultCLIConfig(), cfg)
}

func TestCLIConfigNamedFileMustExist(t *testing.T) {
	e := newCLIEnv(t)
	missing := filepath.Join(e.work, "nope.yaml")
	_, err := LoadCLIConfig(e.source(missing))
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), missing)
	assert.Contains(t, err.Error(), "--config")

	e.env[CLIConfigEnv] = missing
	_, err = LoadCLIConfig(e.source(""))
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), "$"+CLIConfigEnv)
}

func TestCLIConfigExpandsHome(t *testing.T) {
	e := newCLIEnv(t)
	p := filepath.Join(e.work, "c.yaml")
	require.NoError(t, os.WriteFile(p, []byte("state: {root: ~/loop-state}\n"), 0o644))
	cfg, err := LoadCLIConfig(e.source(p))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(e.home, "loop-state"), cfg.StateRoot)
	assert.Equal(t, filepath.Join(e.home, "loop-state", "logs", "events.jsonl"), cfg.EventLogPath)
}

func TestParseCLIConfig(t *testing.T) {
	cases := []struct {
		name  string
		yaml  string
		check func(t *testing.T, cfg CLIConfig)
	}{
		{
			name: "empty file is the defaults",
			yaml: "",
			check: func(t *testing.T, cfg CLIConfig) {
				want := DefaultCLIConfig()
				want.Path = "c.yaml"
				assert.Equal(t, want, cfg)
				assert.Equal(t, "the-loop execute", cfg.ExecuteKeyword)
				assert.Equal(t, filepath.Join(".the-loop", "logs", "events.jsonl"), cfg.EventLogPath)
			},
		},
		{
			name: "full",
			yaml: `version: "0.5.0"
state: {root: /var/lib/theloop}
routing:
  authorizedUsers: [dana, "", fox]
  control:
    keywords:
      execute: "loop go"
      stop: ""
  tmux: {sessionPerPr: always}
  graph: {specDir: specs/}
eventLog: {enabled: false}
integrations:
  github: {transport: cli}
  slack: {transport: webhook}
`,
			check: func(t *testing.T, cfg CLIConfig) {
				assert.Equal(t, "0.5.0", cfg.Version)
				assert.Equal(t, "/var/lib/theloop", cfg.StateRoot)
				assert.Equal(t, filepath.Join("/var/lib/theloop", "logs", "events.jsonl"), cfg.EventLogPath)
				assert.False(t, cfg.EventLogEnabled)
				assert.Equal(t, []string{"dana", "fox"}, cfg.AuthorizedUsers, "empty entries are dropped")
				assert.Equal(t, "loop go", cfg.ExecuteKeyword)
				assert.Equal(t, "loop go", cfg.Keywords["execute"])
				assert.Equal(t, "", cfg.Keywords["stop"], "an empty keyword disables the command")
				assert.Equal(t, "the-loop start", cfg.Keywords["start"])
				assert.Len(t, cfg.Keywords, 8)
				assert.Equal(t, SessionPerPrAlways, cfg.SessionPerPr)
				assert.Equal(t, "specs", cfg.GraphSpecDir)
				assert.Equal(t, map[string]any{"transport": "cli"}, cfg.Integrations["github"])
				assert.Contains(t, cfg.Integrations, "slack", "theloop's integrations package configures Slack here")
				assert.Empty(t, cfg.Warnings)
			},
		},
		{
			name: "eventLog.path",
			yaml: "eventLog: {path: /tmp/ev.jsonl}\n",
			check: func(t *testing.T, cfg CLIConfig) {
				assert.Equal(t, "/tmp/ev.jsonl", cfg.EventLogPath)
				assert.True(t, cfg.EventLogEnabled)
			},
		},
		{
			name: "numeric version",
			yaml: "version: 0.5\n",
			check: func(t *testing.T, cfg CLIConfig) {
				assert.Equal(t, "0.5", cfg.Version)
			},
		},
		{
			name: "newer version",
			yaml: "version: 1.2.0\n",
			check: func(t *testing.T, cfg CLIConfig) {
				assert.Equal(t, "1.2.0", cfg.Version)
			},
		},
		{
			name: "warnings",
			yaml: "routing:\n  tmux: {sessionPerPr: sometimes}\n",
			check: func(t *testing.T, cfg CLIConfig) {
				require.Len(t, cfg.Warnings, 1)
				assert.Contains(t, cfg.Warnings[0], "routing.tmux.sessionPerPr: \"sometimes\"")
				assert.Equal(t, SessionPerPrCrossRepository, cfg.SessionPerPr)
			},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := ParseCLIConfig("c.yaml", []byte(tc.yaml))
			require.NoError(t, err)
			tc.check(t, cfg)
		})
	}
}

func TestParseCLIConfigRefuses(t *testing.T) {
	cases := []struct {
		name string
		yaml string
		is   error
		says []string
	}{
		{"unparseable", "routing:\n  authorizedUsers: [dana\n", ErrInvalidConfig, []string{"c.yaml", "not valid YAML", "[2:"}},
		{"not a mapping", "[1, 2]\n", ErrInvalidConfig, []string{"must be a YAML mapping"}},
		{"old version", "version: 0.3.0\n", ErrConfigTooOld, []string{`version "0.3.0" is older than 0.5.0`, "migrate"}},
		{"old numeric version", "version: 0.4\n", ErrConfigTooOld, []string{`version "0.4"`}},
		{"bad version", "version: latest\n", ErrInvalidConfig, []string{`version "latest" is not a dotted version`}},
		{"nested routing", "webhooks:\n  ghWebhook:\n    routing:\n      authorizedUsers: [dana]\n", ErrConfigTooOld, []string{"webhooks.ghWebhook.routing was removed (use the top-level routing block)", `version: "0.5.0"`}},
		{"ghBinary", "routing:\n  reactions: {ghBinary: /usr/bin/gh}\n", ErrConfigTooOld, []string{"routing.reactions.ghBinary was removed (use integrations.github.cli.binary)"}},
		{"polling.stateFile", "version: 0.5.0\npolling: {stateFile: x.json}\nrouting: {control: {ghBinary: gh}}\n", ErrConfigTooOld, []string{"polling.stateFile was removed (use state.root)", "routing.control.ghBinary"}},
		{"mistyped users", "routing: {authorizedUsers: dana}\n", ErrInvalidConfig, []string{"routing.authorizedUsers: expected a list of strings, got a string"}},
		{"mistyped keyword", "routing: {control: {keywords: {start: 5}}}\n", ErrInvalidConfig, []string{"routing.control.keywords.start: expected a string"}},
		{"mistyped eventLog", "eventLog: {enabled: 'no'}\n", ErrInvalidConfig, []string{"eventLog.enabled: expected true or false"}},
		{"mistyped integrations", "integrations: [github]\n", ErrInvalidConfig, []string{"integrations: expected a mapping, got a list"}},
		{"routing not a mapping", "routing: 5\n", ErrInvalidConfig, []string{"routing: expected a mapping, got a number"}},
		{"unsafe spec dir", "routing: {graph: {specDir: ../elsewhere}}\n", ErrUnsafePath, []string{"routing.graph.specDir", "leaves the repository"}},
		// Accepted but never honoured is refused (docs/decisions.md §20).
		{"removed runner", "routing:\n  runner: process\n", ErrInvalidConfig, []string{"routing.runner is no longer accepted", "loopctl config migrate` removes it"}},
		{"repoHooks true", "routing: {graph: {repoHooks: true}}\n", ErrInvalidConfig, []string{"routing.graph.repoHooks: true is refused"}},
		{"keyword of no command", "routing: {control: {keywords: {review: 'the-loop review'}}}\n", ErrInvalidConfig, []string{"routing.control.keywords.review is not a control command"}},
		{"webhook off", "webhooks: {ghWebhook: {enabled: false}}\n", ErrInvalidConfig, []string{"webhooks.ghWebhook.enabled: false is not supported"}},
		{"routing off", "routing: {enabled: false}\n", ErrInvalidConfig, []string{"routing.enabled: false is not supported"}},
		{"enum", "routing: {harnessTrust: {scope: everywhere}}\n", ErrInvalidConfig, []string{`routing.harnessTrust.scope: "everywhere" is not one of workspace-root, directory`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCLIConfig("c.yaml", []byte(tc.yaml))
			require.ErrorIs(t, err, tc.is)
			for _, s := range tc.says {
				assert.Contains(t, err.Error(), s)
			}
			assert.Contains(t, err.Error(), "c.yaml", "the error names the file")
		})
	}
}

func TestResolveSessionPerPr(t *testing.T) {
	cases := []struct {
		in      any
		want    string
		warning bool
	}{
		{nil, SessionPerPrCrossRepository, false},
		{true, SessionPerPrCrossRepository, false},
		{false, SessionPerPrNever, false},
		{"never", SessionPerPrNever, false},
		{"cross-repository", SessionPerPrCrossRepository, false},
		{"always", SessionPerPrAlways, false},
		{"Always", SessionPerPrCrossRepository, true},
		{uint64(1), SessionPerPrCrossRepository, true},
		{[]any{"never"}, SessionPerPrCrossRepository, true},
	}
	for _, tc := range cases {
		got, warning := ResolveSessionPerPr(tc.in)
		assert.Equal(t, tc.want, got, "%#v", tc.in)
		assert.Equal(t, tc.warning, warning != "", "%#v: %q", tc.in, warning)
	}
}

func TestControlKeywordDefaults(t *testing.T) {
	kw := DefaultControlKeywords()
	for _, c := range ControlCommands() {
		assert.Equal(t, "the-loop "+c, kw[c])
	}
	assert.Equal(t, []string{"start", "stop", "pause", "resume", "execute", "contribute", "cleanup", "do"}, ControlCommands())
}

// FuzzParseHarnessConfig: a repository's harness config is untrusted; no
// bytes may panic, and the only error is an unsafe specDir.
func FuzzParseHarnessConfig(f *testing.F) {
	for _, s := range []string{
		"", "workflow:\n  specDir: docs/specs\n", "workflow: {specDir: ../x}\n", "- 1\n",
		"notifications: {events: {a: [b]}}\n", "ticketing: {github: {owner: o, repo: r}}\n",
		"a: &a [1]\nb: *a\n", "workflow:\n  specDir: [\n", "? [1]\n: 2\n", "!!binary aGk=\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg, _, err := ParseHarnessConfig("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrUnsafePath) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		if err := ValidateSpecDir("workflow.specDir", cfg.SpecDir); err != nil {
			t.Fatalf("accepted an unsafe spec dir %q: %v", cfg.SpecDir, err)
		}
	})
}

// FuzzParseCLIConfig: no bytes may panic; every error is one of ours.
func FuzzParseCLIConfig(f *testing.F) {
	for _, s := range []string{"", "version: 0.5.0\n", "routing: {authorizedUsers: [a]}\n", "webhooks: {ghWebhook: {routing: {}}}\n", "version: [1]\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		_, err := ParseCLIConfig("fuzz.yaml", data)
		if err != nil && !errors.Is(err, ErrInvalidConfig) && !errors.Is(err, ErrConfigTooOld) && !errors.Is(err, ErrUnsafePath) {
			t.Fatalf("unexpected error kind: %v", err)
		}
	})
}
