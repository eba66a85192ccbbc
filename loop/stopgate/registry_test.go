package stopgate

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

const sid = "0b6f8f57-2d3c-4a54-9d8e-5f1f3e0c9a11"

func writeRecord(t *testing.T, stateRoot, ref, sessionID string) {
	t.Helper()
	item, err := workitem.Parse(ref)
	require.NoError(t, err)
	rec := sessions.Record{Item: item, Harness: "claude", SessionID: sessionID, TmuxName: sessions.TmuxName(item), Cwd: "/work/" + item.Slug(),
		Status: sessions.StatusActive, Created: time.Date(2026, 5, 4, 9, 0, 0, 0, time.UTC)}
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	dir := sessions.RegistryDir(stateRoot)
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, item.Slug()+".json"), data, 0o644))
}

func TestRegistryLookup(t *testing.T) {
	home := t.TempDir()
	abs := filepath.Join(t.TempDir(), "state")
	writeRecord(t, abs, "github:acme/widgets#42", sid)
	writeRecord(t, filepath.Join(home, "relative-state"), "github:acme/widgets#43", sid)
	writeRecord(t, filepath.Join(home, ".the-loop"), "github:acme/widgets#44", sid)
	cfg := func(body string) string {
		p := filepath.Join(t.TempDir(), "cli-config.yaml")
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
		return p
	}
	homeCfg := filepath.Join(home, ".the-loop", "cli-config.yaml")

	for _, tc := range []struct {
		name    string
		env     map[string]string
		homeCfg string
		want    string
		err     string
	}{
		{name: "THE_LOOP_STATE_ROOT", env: map[string]string{StateRootEnv: abs}, want: "issue-42"},
		{name: "THE_LOOP_CLI_CONFIG with an absolute state root", env: map[string]string{"THE_LOOP_CLI_CONFIG": cfg("state:\n  root: " + abs + "\n")}, want: "issue-42"},
		{name: "a relative state root is under the home directory", env: map[string]string{"THE_LOOP_CLI_CONFIG": cfg("state:\n  root: relative-state\n")}, want: "issue-43"},
		{name: "the home config", homeCfg: "state:\n  root: " + abs + "\n", want: "issue-42"},
		{name: "no config: ~/.the-loop", want: "issue-44"},
		{name: "THE_LOOP_CLI_CONFIG names a missing file", env: map[string]string{"THE_LOOP_CLI_CONFIG": filepath.Join(home, "nope.yaml")}, err: "does not exist"},
		{name: "a config that does not parse", env: map[string]string{"THE_LOOP_CLI_CONFIG": cfg("state: [\n")}, err: "cli-config.yaml"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			os.Remove(homeCfg)
			if tc.homeCfg != "" {
				require.NoError(t, os.WriteFile(homeCfg, []byte(tc.homeCfg), 0o644))
			}
			lookup := RegistryLookup(func(k string) string { return tc.env[k] }, func() (string, error) { return home, nil })
			s, err := lookup(sid)
			if tc.err != "" {
				require.ErrorContains(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.want, s.WorkItem)
			require.True(t, filepath.IsAbs(s.Cwd))
		})
	}

	t.Run("unknown and malformed session ids are not theloop's", func(t *testing.T) {
		lookup := RegistryLookup(func(k string) string { return map[string]string{StateRootEnv: abs}[k] }, func() (string, error) { return home, nil })
		for _, id := range []string{"11111111-0000-0000-0000-000000000000", "", "../x", "-rf", string(make([]byte, 300))} {
			_, err := lookup(id)
			require.True(t, errors.Is(err, ErrNoSession), "%q: %v", id, err)
		}
	})
	t.Run("a missing registry is no session", func(t *testing.T) {
		lookup := RegistryLookup(func(k string) string { return map[string]string{StateRootEnv: filepath.Join(home, "none")}[k] }, func() (string, error) { return home, nil })
		_, err := lookup(sid)
		require.ErrorIs(t, err, ErrNoSession)
	})
	t.Run("a work item without a spec directory", func(t *testing.T) {
		root := t.TempDir()
		writeRecord(t, root, "jira:acme/widgets#5", sid)
		lookup := RegistryLookup(func(k string) string { return map[string]string{StateRootEnv: root}[k] }, func() (string, error) { return home, nil })
		_, err := lookup(sid)
		if err != nil && !errors.Is(err, ErrNoSession) {
			require.ErrorContains(t, err, "has no spec directory")
		}
	})
}
