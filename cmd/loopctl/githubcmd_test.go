package main

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGitHubAppManifestHasExactlyTheGraphsPermissions(t *testing.T) {
	f, io := testFactory(t, t.TempDir(), nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "github", "app-manifest", "--webhook-url", "https://loopd.example.com/gh-webhook"}, f))
	var m struct {
		Name   string            `json:"name"`
		Perms  map[string]string `json:"default_permissions"`
		Events []string          `json:"default_events"`
		Hook   map[string]any    `json:"hook_attributes"`
	}
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &m), io.out.String())
	require.Equal(t, map[string]string{"issues": "write", "pull_requests": "write", "checks": "read", "metadata": "read", "repository_hooks": "read"}, m.Perms)
	require.Equal(t, "https://loopd.example.com/gh-webhook", m.Hook["url"])
	require.Contains(t, m.Events, "issue_comment")
	require.Contains(t, m.Events, "pull_request_review")

	f, io = testFactory(t, t.TempDir(), nil)
	require.Equal(t, exitOK, Main([]string{"loopctl", "github", "app-manifest", "--rule", "codeowners"}, f))
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &m))
	require.Equal(t, "read", m.Perms["contents"], "CODEOWNERS is read from the repository")
	require.Equal(t, "read", m.Perms["members"], "teams in CODEOWNERS are resolved")
}
