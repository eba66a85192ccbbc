package loop_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/xeipuuv/gojsonschema"

	"github.com/theloop-dev/theloop/loop"
)

func TestUnknownKeysAreRefusedWithTheNearestKey(t *testing.T) {
	for _, tc := range []struct {
		yaml, unknown, nearest string
	}{
		{"routing:\n  authorisedUsers: [dana]\n", "routing.authorisedUsers", "routing.authorizedUsers"},
		{"webhooks:\n  ghWebhook:\n    prot: 8787\n", "webhooks.ghWebhook.prot", "webhooks.ghWebhook.port"},
		{"routing:\n  contorl:\n    enabled: true\n", "routing.contorl", "routing.control"},
		{"polling:\n  sources:\n    - repo: [octo/demo]\n", "polling.sources[].repo", "polling.sources[].repos"},
		{"servcie:\n  listen: x\n", "servcie", "service"},
		{"zzz: 1\n", "zzz", ""},
	} {
		t.Run(tc.unknown, func(t *testing.T) {
			_, err := loop.ParseCLIConfig("cli-config.yaml", []byte(tc.yaml))
			require.ErrorIs(t, err, loop.ErrInvalidConfig)
			var uk *loop.UnknownKeyError
			require.True(t, errors.As(err, &uk))
			require.Equal(t, tc.unknown, uk.Keys[0].Path)
			require.Equal(t, tc.nearest, uk.Keys[0].Nearest)
			require.Contains(t, err.Error(), "cli-config.yaml: unknown key "+tc.unknown)
		})
	}
	// Every catalogued key is accepted, free blocks are not walked (a
	// collaborators list is read by its own reader: notifications.go).
	_, err := loop.ParseCLIConfig("ok.yaml", []byte("version: \"0.5.0\"\nservice:\n  listen: 127.0.0.1:4114\n  metrics:\n    gateStuckAfterSeconds: 60\nqueue:\n  url: nats://x:4222\ncollaborators:\n  - {login: dana, roles: [operator]}\nrouting:\n  control:\n    keywords:\n      start: go\n"))
	require.NoError(t, err)
}

func TestSchemaValidatesTheCatalogue(t *testing.T) {
	schema := loop.CLIConfigSchema()
	require.True(t, json.Valid(schema))
	sl := gojsonschema.NewBytesLoader(schema)
	for _, tc := range []struct {
		doc string
		ok  bool
	}{
		{`{"version":"0.5.0","routing":{"authorizedUsers":["dana"],"spawnOnUnmatched":"labeled","control":{"keywords":{"start":"go"}}},"polling":{"sources":[{"repos":["o/r"]}]}}`, true},
		{`{"routing":{"spawnOnUnmatched":"sometimes"}}`, false},
		{`{"routing":{"authorisedUsers":["dana"]}}`, false},
		{`{"webhooks":{"ghWebhook":{"port":"8787"}}}`, false},
	} {
		res, err := gojsonschema.Validate(sl, gojsonschema.NewStringLoader(tc.doc))
		require.NoError(t, err)
		require.Equal(t, tc.ok, res.Valid(), "%s: %v", tc.doc, res.Errors())
	}
}

func readFixture(t testing.TB, name string) []byte {
	b, err := os.ReadFile(filepath.Join("testdata", "migrate", name))
	require.NoError(t, err)
	return b
}

func TestMigrateEachOldVersion(t *testing.T) {
	for _, tc := range []struct {
		file         string
		changes      []string
		commentsKept bool
		check        func(t *testing.T, c loop.CLIConfig)
	}{
		{"v0.3.yaml", []string{
			"moved webhooks.ghWebhook.routing.authorizedUsers → routing.authorizedUsers",
			"moved webhooks.ghWebhook.routing.control → routing.control",
			"moved webhooks.ghWebhook.routing.enabled → routing.enabled",
			"kept routing.spawnOnUnmatched; webhooks.ghWebhook.routing.spawnOnUnmatched disagrees (labeled vs never) and was dropped",
			"moved routing.control.ghBinary → integrations.github.cli.binary",
			"version " + loop.CurrentCLIConfigVersion,
		}, true, func(t *testing.T, c loop.CLIConfig) {
			require.Equal(t, []string{"dana"}, c.AuthorizedUsers)
			require.Equal(t, "/usr/local/bin/gh", c.Integrations["github"].(map[string]any)["cli"].(map[string]any)["binary"])
			require.Equal(t, "never", c.Settings.Routing.SpawnOnUnmatched)
		}},
		{"v0.4.yaml", []string{
			"moved routing.announce.ghBinary → integrations.github.cli.binary",
			"moved routing.reactions.ghBinary → integrations.github.cli.binary",
			"removed polling.stateFile (the poll ledger lives under state.root)",
			"removed service.cors (the control plane sends no CORS headers)",
			"removed service.port (nothing reads it: see service.listen)",
			"version " + loop.CurrentCLIConfigVersion,
		}, true, nil},
		{"unversioned.yaml", []string{"version " + loop.CurrentCLIConfigVersion}, true, nil},
		{"current.yaml", nil, true, nil},
	} {
		t.Run(tc.file, func(t *testing.T) {
			in := readFixture(t, tc.file)
			if len(tc.changes) > 0 && tc.file != "unversioned.yaml" {
				_, err := loop.ParseCLIConfig(tc.file, in)
				require.ErrorIs(t, err, loop.ErrConfigTooOld, "the old file is refused")
				require.Contains(t, err.Error(), "loopctl config migrate")
			}
			m, err := loop.MigrateCLIConfig(tc.file, in)
			require.NoError(t, err)
			var got []string
			for _, c := range m.Changes {
				got = append(got, c.String())
			}
			require.Equal(t, tc.changes, got)
			require.Equal(t, tc.commentsKept, m.CommentsKept)
			if tc.commentsKept && len(tc.changes) > 0 {
				for _, line := range strings.Split(string(in), "\n") {
					if i := strings.Index(line, "#"); i >= 0 {
						require.Contains(t, string(m.Output), line[i:], "every comment survives")
					}
				}
			}
			if len(tc.changes) == 0 {
				require.Equal(t, in, m.Output)
			}
			c, err := loop.ParseCLIConfig(tc.file, m.Output)
			require.NoError(t, err, "the migrated file loads:\n%s", m.Output)
			require.Equal(t, loop.CurrentCLIConfigVersion, c.Version)
			if tc.check != nil {
				tc.check(t, c)
			}
			again, err := loop.MigrateCLIConfig(tc.file, m.Output)
			require.NoError(t, err)
			require.Empty(t, again.Changes, "idempotent")
			require.Equal(t, m.Output, again.Output)
			m2, err := loop.MigrateCLIConfig(tc.file, in)
			require.NoError(t, err)
			require.Equal(t, m.Output, m2.Output, "deterministic")
		})
	}
}

// An operator's commented config migrates with its comments (each beside
// the key it describes, a removed key's going with it) and its key order,
// and the changes name every key moved and every retired key removed.
func TestMigrateKeepsCommentsAndOrder(t *testing.T) {
	in := readFixture(t, "commented.yaml")
	m, err := loop.MigrateCLIConfig("commented.yaml", in)
	require.NoError(t, err)
	var got []string
	for _, c := range m.Changes {
		got = append(got, c.String())
	}
	require.Equal(t, []string{
		"moved routing.control.ghBinary → integrations.github.cli.binary",
		"moved webhooks.ghWebhook.repositories → repositories",
		"removed webhooks.ghWebhook.pidfile (nothing reads it: loopd locks <state root>/loopd.lock)",
		"removed routing.runner (nothing reads it: tmux is the only runner)",
		"removed service.host (nothing reads it: see service.listen)",
		"version " + loop.CurrentCLIConfigVersion,
	}, got)
	require.True(t, m.CommentsKept)
	out := string(m.Output)
	gone := []string{"# systemd handles this now", "# the only runner anyway", "# old control-plane address"}
	for _, line := range strings.Split(string(in), "\n") {
		i := strings.Index(line, "#")
		if i < 0 || slices.Contains(gone, line[i:]) {
			continue
		}
		require.Contains(t, out, line[i:], "comment kept:\n%s", out)
	}
	for _, g := range gone {
		require.NotContains(t, out, g, "a removed key's comment goes with it")
	}
	// Each comment stays beside its key.
	for _, pair := range [][2]string{
		{"root: /var/lib/loopd/state # on the SSD", ""},
		{"# The repositories we serve.", "repositories:"},
		{"- octo/demo # the pilot", ""},
		{"# the second team joined in March", "- octo/widgets"},
		{"# A day at a gate is stuck.", "gateStuckAfterSeconds: 86400"},
	} {
		i := strings.Index(out, pair[0])
		require.GreaterOrEqual(t, i, 0, "%q in:\n%s", pair[0], out)
		if pair[1] != "" {
			require.Equal(t, pair[1], strings.TrimSpace(strings.SplitN(out[i+len(pair[0])+1:], "\n", 2)[0]), "%q is followed by its key:\n%s", pair[0], out)
		}
	}
	// Top-level order: the moved repositories before the webhooks they
	// came from, the rest as written.
	var top []string
	for _, line := range strings.Split(out, "\n") {
		if line != "" && line[0] != ' ' && line[0] != '#' && line[0] != '-' {
			top = append(top, strings.SplitN(line, ":", 2)[0])
		}
	}
	require.Equal(t, []string{"version", "state", "repositories", "webhooks", "routing", "service", "integrations"}, top, out)
	require.True(t, strings.HasPrefix(out, "# theloop operator configuration"), out)
	require.True(t, strings.HasSuffix(out, "# end of file: keep this line\n"), out)

	c, err := loop.ParseCLIConfig("commented.yaml", m.Output)
	require.NoError(t, err, out)
	require.Equal(t, []string{"octo/demo", "octo/widgets"}, c.Settings.Repositories)
	again, err := loop.MigrateCLIConfig("commented.yaml", m.Output)
	require.NoError(t, err)
	require.Empty(t, again.Changes)
}

// webhooks.ghWebhook.repositories beside a top-level list: the union, in
// the top-level's order, named in the change.
func TestMigrateMergesWebhookRepositories(t *testing.T) {
	in := []byte("version: \"0.5.0\"\nrepositories: [octo/a, Octo/B]\nwebhooks:\n  ghWebhook:\n    repositories: [octo/b, octo/c]\n")
	_, err := loop.ParseCLIConfig("c.yaml", in)
	require.ErrorIs(t, err, loop.ErrInvalidConfig)
	require.ErrorContains(t, err, "webhooks.ghWebhook.repositories is no longer read: use the top-level repositories (`loopctl config migrate` moves it)")
	m, err := loop.MigrateCLIConfig("c.yaml", in)
	require.NoError(t, err)
	require.Equal(t, "moved webhooks.ghWebhook.repositories → repositories (merged into repositories, adding octo/c)", m.Changes[0].String())
	c, err := loop.ParseCLIConfig("c.yaml", m.Output)
	require.NoError(t, err, "%s", m.Output)
	require.Equal(t, []string{"octo/a", "Octo/B", "octo/c"}, c.Settings.Repositories)
}

func FuzzMigrateCLIConfig(f *testing.F) {
	for _, name := range []string{"v0.3.yaml", "v0.4.yaml", "unversioned.yaml", "current.yaml", "commented.yaml"} {
		f.Add(readFixture(f, name))
	}
	f.Add([]byte("---\nrouting: {announce: {ghBinary: 1}}\nintegrations: x\n"))
	f.Add([]byte("version: 0.1\n"))
	f.Add([]byte(""))
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := loop.MigrateCLIConfig("f.yaml", data)
		if err != nil {
			return
		}
		again, err := loop.MigrateCLIConfig("f.yaml", m.Output)
		require.NoError(t, err, "the output parses:\n%s", m.Output)
		require.Empty(t, again.Changes, "idempotent: %v\n%s", again.Changes, m.Output)
		require.Equal(t, string(m.Output), string(again.Output))
		if _, err := loop.ParseCLIConfig("f.yaml", m.Output); err != nil {
			require.False(t, errors.Is(err, loop.ErrConfigTooOld), "a migrated file is never too old: %v", err)
		}
		_ = strings.TrimSpace
	})
}
