package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/goccy/go-yaml"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

// A commented operator config: migrate keeps every comment, lists each
// retired key it removed and each key it moved, and keeps the original.
func TestConfigMigrateCommentedConfig(t *testing.T) {
	f, io := testFactory(t, t.TempDir(), nil)
	path := filepath.Join(t.TempDir(), "cli-config.yaml")
	src, err := os.ReadFile("../../loop/testdata/migrate/commented.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(path, src, 0o600))
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "migrate", "--config", path}, f))
	for _, want := range []string{
		"moved webhooks.ghWebhook.repositories → repositories",
		"moved routing.control.ghBinary → integrations.github.cli.binary",
		"removed routing.runner (nothing reads it: tmux is the only runner)",
		"removed service.host (nothing reads it: see service.listen)",
		"removed webhooks.ghWebhook.pidfile",
	} {
		require.Contains(t, io.out.String(), want)
	}
	require.NotContains(t, io.out.String(), "comments are not kept")
	out, err := os.ReadFile(path)
	require.NoError(t, err)
	for _, c := range []string{"# Owned by the platform team", "# The repositories we serve.", "# the pilot", "# A day at a gate is stuck.", "# end of file: keep this line"} {
		require.Contains(t, string(out), c)
	}
	bak, err := os.ReadFile(path + ".bak")
	require.NoError(t, err)
	require.Equal(t, src, bak)
	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "show", "--config", path}, f), io.err.String())
}

func TestConfigSchemaShowMigrate(t *testing.T) {
	f, io := testFactory(t, t.TempDir(), nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "schema"}, f))
	require.True(t, json.Valid(io.out.Bytes()))
	require.Contains(t, io.out.String(), `"authorizedUsers"`)

	dir := t.TempDir()
	old := filepath.Join(dir, "cli-config.yaml")
	src, err := os.ReadFile("../../loop/testdata/migrate/v0.4.yaml")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(old, src, 0o640))

	io.out.Reset()
	io.err.Reset()
	require.Equal(t, exitRefused, Main([]string{"loopctl", "config", "show", "--config", old}, f), "an old config is refused")
	require.Contains(t, io.err.String(), "loopctl config migrate")

	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "migrate", "--config", old, "--dry-run"}, f))
	require.Contains(t, io.out.String(), "removed service.cors")
	require.Contains(t, io.out.String(), "dry run")
	after, _ := os.ReadFile(old)
	require.Equal(t, src, after, "--dry-run writes nothing")

	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "migrate", "--config", old}, f))
	require.Contains(t, io.out.String(), "migrated")
	require.Contains(t, io.out.String(), "the original is in "+old+".bak")
	fi, err := os.Stat(old)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o640), fi.Mode().Perm(), "the file keeps its mode")
	bak, err := os.ReadFile(old + ".bak")
	require.NoError(t, err)
	require.Equal(t, src, bak, "the original is kept byte for byte beside it")
	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "migrate", "--config", old}, f))
	require.Contains(t, io.out.String(), "nothing to do")

	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "show", "--config", old, "--format", "json"}, f))
	var rows []loop.ShownSetting
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &rows))
	src2 := map[string]loop.ShownSetting{}
	for _, r := range rows {
		src2[r.Key] = r
	}
	require.Equal(t, loop.SourceFile, src2["polling.enabled"].Source)
	require.Equal(t, true, src2["polling.enabled"].Value)
	require.Equal(t, loop.SourceDefault, src2["routing.spawnOnUnmatched"].Source)
	require.Equal(t, "never", src2["routing.spawnOnUnmatched"].Value)
	require.Equal(t, "(unset)", src2["$THE_LOOP_GH_WEBHOOK_SECRET"].Value, "a secret is never shown")
}

// config show prints values as the config writes them, never Go's own
// rendering of a nil, a map or a struct.
func TestConfigShowPrintsNoGoSyntax(t *testing.T) {
	f, io := testFactory(t, t.TempDir(), nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "show"}, f), io.err.String())
	out := io.out.String()
	for _, bad := range []string{"<nil>", "map[", "[]", "&{"} {
		require.NotContains(t, out, bad)
	}
	require.Contains(t, out, "execute=the-loop execute")

	for _, tc := range []struct {
		v    any
		want string
	}{
		{nil, "(not set)"},
		{[]string(nil), "(not set)"},
		{[]string{}, "(none)"},
		{[]string{"a", "b"}, "a, b"},
		{map[string]string{"b": "2", "a": "1"}, "a=1, b=2"},
		{map[string][]string{"x": {"p", "q"}}, "x=p, q"},
		{struct{ A int }{1}, `{"A":1}`},
		{"", `""`},
		{true, "true"},
	} {
		require.Equal(t, tc.want, loop.ShowValue(tc.v), "%#v", tc.v)
	}
}

// TestConfigHarnessWarnsOnUnreadKeys: loopctl config harness prints what
// theloop reads of a repository's harness config, and one warning per key
// of the-loop's schema it ignores, naming the key and what it does instead
// — for every such key, set together in one file.
func TestConfigHarnessWarnsOnUnreadKeys(t *testing.T) {
	repo := newRepo(t)
	var b strings.Builder
	raw := map[string]any{}
	setNested(raw, "tooling.unitTest.python", "pytest")
	setNested(raw, "tooling.packageManager.python", "uv")
	setNested(raw, "tooling.lint.markdown", "markdownlint")
	all := append(loop.HarnessKeysRead(), loop.HarnessKeysUnread()...)
	for _, k := range loop.HarnessKeysUnread() {
		// A key that holds catalogued keys (tooling.lint) is set through
		// a child of its own (tooling.lint.python).
		leaf := k
		for _, other := range all {
			if strings.HasPrefix(other, k+".") {
				leaf = k + ".other"
			}
		}
		setNested(raw, leaf, "x")
	}
	extra, err := yaml.Marshal(raw)
	require.NoError(t, err)
	b.Write(extra)
	require.NoError(t, os.MkdirAll(filepath.Join(repo, ".the-loop"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".the-loop", "harness-config.yaml"), []byte(b.String()), 0o644))

	f, io := testFactory(t, repo, nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "harness"}, f), io.err.String())
	require.Contains(t, io.out.String(), "verification.testCommand (effective)")
	require.Contains(t, io.out.String(), "uv run pytest")
	for _, k := range loop.HarnessKeysUnread() {
		require.Contains(t, io.err.String(), "warning: .the-loop/harness-config.yaml: "+k+" is not read by theloop: ", k)
	}

	io.out.Reset()
	require.Equal(t, exitOK, Main([]string{"loopctl", "config", "harness", "--jq", ".unread | length"}, f), io.err.String())
	require.Equal(t, fmt.Sprint(len(loop.HarnessKeysUnread())), strings.TrimSpace(io.out.String()))
}

// setNested sets "a.b.c" in m, keeping what is there.
func setNested(m map[string]any, key string, v any) {
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			sub = map[string]any{}
			m[p] = sub
		}
		m = sub
	}
	if _, ok := m[parts[len(parts)-1]]; !ok {
		m[parts[len(parts)-1]] = v
	}
}
