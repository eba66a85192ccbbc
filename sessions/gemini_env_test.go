package sessions

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestGeminiPrepareEnvironmentTrustsTheCheckout(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "home", ".gemini", "trustedFolders.json")
	g := &Gemini{TrustedFolders: file}
	cwd := filepath.Join(dir, "work", "issue-1")

	p, err := g.PrepareEnvironment(cwd)
	require.NoError(t, err)
	require.Equal(t, []string{cwd}, p.Trusted)
	b, err := os.ReadFile(file)
	require.NoError(t, err)
	require.JSONEq(t, `{"`+cwd+`": "TRUST_FOLDER"}`, string(b))

	// Idempotent; the operator's entries are kept; their verdict on the
	// checkout is not overridden.
	require.NoError(t, os.WriteFile(file, []byte(`{"/srv/x": "TRUST_PARENT", "`+cwd+`": "TRUST_FOLDER"}`), 0o600))
	p, err = g.PrepareEnvironment(cwd)
	require.NoError(t, err)
	require.Empty(t, p.Changed)
	other := filepath.Join(dir, "work", "issue-2")
	_, err = g.PrepareEnvironment(other)
	require.NoError(t, err)
	b, _ = os.ReadFile(file)
	require.JSONEq(t, `{"/srv/x": "TRUST_PARENT", "`+cwd+`": "TRUST_FOLDER", "`+other+`": "TRUST_FOLDER"}`, string(b))

	require.NoError(t, os.WriteFile(file, []byte(`{"`+cwd+`": "DO_NOT_TRUST"}`), 0o600))
	p, err = g.PrepareEnvironment(cwd)
	require.NoError(t, err)
	require.Len(t, p.Warnings, 1)
	b, _ = os.ReadFile(file)
	require.Contains(t, string(b), "DO_NOT_TRUST")

	// A file that is not JSON is refused, never overwritten.
	require.NoError(t, os.WriteFile(file, []byte("{oops"), 0o600))
	_, err = g.PrepareEnvironment(cwd)
	require.Error(t, err)
	b, _ = os.ReadFile(file)
	require.Equal(t, "{oops", string(b))

	// Disabled without a file.
	p, err = (&Gemini{}).PrepareEnvironment(cwd)
	require.NoError(t, err)
	require.Empty(t, p.Changed)
}

func TestGeminiTrustedFoldersFileResolvesAsTheCLI(t *testing.T) {
	env := map[string]string{}
	get := func(k string) string { return env[k] }
	require.Equal(t, "/h/.gemini/trustedFolders.json", GeminiTrustedFoldersFile(get, "/h"))
	env["GEMINI_CLI_HOME"] = "/g"
	require.Equal(t, "/g/.gemini/trustedFolders.json", GeminiTrustedFoldersFile(get, "/h"))
	env["GEMINI_CLI_TRUSTED_FOLDERS_PATH"] = "/t/tf.json"
	require.Equal(t, "/t/tf.json", GeminiTrustedFoldersFile(get, "/h"))
	require.Equal(t, "", GeminiTrustedFoldersFile(func(string) string { return "" }, ""))
}
