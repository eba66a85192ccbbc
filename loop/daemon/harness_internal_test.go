package daemon

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
)

func TestHarnessLabelPicksTheHarness(t *testing.T) {
	for _, tc := range []struct {
		name, payload, want string
	}{
		{"issue label", `{"issue":{"labels":[{"name":"bug"},{"name":"the-loop: harness-codex"}]}}`, "codex"},
		{"pull request label", `{"pull_request":{"labels":[{"name":"The-Loop: harness-gemini"}]}}`, "gemini"},
		{"the label just added", `{"action":"labeled","label":{"name":"the-loop: harness-cursor"}}`, "cursor"},
		{"claude by label", `{"issue":{"labels":[{"name":"the-loop: harness-claude"}]}}`, "claude"},
		{"an unknown harness is the default", `{"issue":{"labels":[{"name":"the-loop: harness-aider"}]}}`, ""},
		{"no label", `{"issue":{"labels":[]}}`, ""},
		{"labels of the wrong shape", `{"issue":{"labels":"the-loop: harness-codex"}}`, ""},
		{"not JSON", `{"issue":`, ""},
		{"nothing", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.want, harnessFor(&ingress.Event{Payload: json.RawMessage(tc.payload)}))
		})
	}
	require.Equal(t, "", harnessFor(nil))
}

// FuzzEventLabels: an untrusted payload never panics the label reader.
func FuzzEventLabels(f *testing.F) {
	for _, s := range []string{`{"issue":{"labels":[{"name":"x"}]}}`, `{"label":null}`, `[]`, `{"pull_request":{"labels":[null,1,{"name":7}]}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		_ = eventLabels(b)
		_ = harnessFor(&ingress.Event{Payload: b})
	})
}

func TestRepositoryHarnessAndStartCheck(t *testing.T) {
	bin := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(bin, "gemini"), []byte("#!/bin/sh\n"), 0o755))
	d := &harnesses{cfg: &Config{}, path: searchPath(bin)}
	d.cfg.Routing.DefaultHarness, d.cfg.Routing.HarnessByRepository = "claude", map[string]string{"octo/site": "gemini"}
	require.NoError(t, d.checkDefault())
	require.Equal(t, "gemini", d.forEvent(&ingress.Event{Repo: "Octo/Site"}))
	require.Equal(t, "codex", d.forEvent(&ingress.Event{Repo: "octo/site", Payload: json.RawMessage(`{"issue":{"labels":[{"name":"the-loop: harness-codex"}]}}`)}), "the label wins")
	require.Equal(t, "", d.forEvent(&ingress.Event{Repo: "octo/other"}))
	require.Contains(t, d.defaultWarning(), "routing.defaultHarness claude: claude is not on loopd's PATH")

	d.cfg.Routing.HarnessByRepository["octo/widgets"] = "codex"
	require.ErrorContains(t, d.checkDefault(), "routing.harnessByRepository.octo/widgets: codex runs codex, which is not on loopd's PATH")
	d.cfg.Routing.HarnessByRepository = nil
	d.cfg.Routing.DefaultHarness = "cursor"
	require.ErrorContains(t, d.checkDefault(), "routing.defaultHarness: cursor runs cursor-agent, which is not on loopd's PATH")
	d.cfg.Routing.DefaultHarness = "gemini"
	require.NoError(t, d.checkDefault())
	require.Empty(t, d.defaultWarning())
}
