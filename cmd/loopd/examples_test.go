package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
)

// exampleConfigs is every operator config shipped under examples/: each
// *cli-config*.yaml file, and each ```yaml block of a Markdown file whose
// first line names a cli-config.yaml. name → content.
func exampleConfigs(t *testing.T) map[string][]byte {
	t.Helper()
	root := filepath.Join("..", "..", "examples")
	fence := regexp.MustCompile("(?s)```ya?ml\n(.*?)```")
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		switch {
		case strings.Contains(d.Name(), "cli-config") && strings.HasSuffix(d.Name(), ".yaml"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			out[path] = b
		case strings.HasSuffix(d.Name(), ".md"):
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, m := range fence.FindAllSubmatch(b, -1) {
				first, _, _ := strings.Cut(string(m[1]), "\n")
				if strings.Contains(first, "cli-config.yaml") {
					out[path+"#yaml-"+string(rune('1'+i))] = m[1]
				}
			}
		}
		return nil
	})
	require.NoError(t, err)
	return out
}

// Every shipped example config loads with loopd's own loader (the CLI
// config, the daemon's mapping, the ingress's) without a single warning,
// and serves at least one repository: an example that drops every event
// as repository-not-bound, or that loopd complains about, is a bug.
func TestExampleConfigsLoadCleanAndServeRepositories(t *testing.T) {
	configs := exampleConfigs(t)
	require.GreaterOrEqual(t, len(configs), 2, "examples/systemd/cli-config.yaml and the cluster README's config at least")
	for name, content := range configs {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "cli-config.yaml")
			require.NoError(t, os.WriteFile(path, content, 0o600))
			vars := map[string]string{ingress.DefaultSecretEnv: "s3cret", "GH_TOKEN": "tok"}
			e, _, _ := testEnv(t, vars)

			cfg, warns, err := loadConfig(e, runOptions{Config: path}, dir)
			require.NoError(t, err, "%s does not load", name)
			require.Empty(t, warns, "%s: loopd warns", name)
			require.NoError(t, cfg.Validate(), name)
			require.NotEmpty(t, cfg.Repos, "%s serves no repository: every event would be dropped (repository-not-bound)", name)

			cli, err := loop.LoadCLIConfig(loop.CLIConfigSource{Path: path, LookupEnv: e.LookupEnv, HomeDir: e.HomeDir, WorkDir: dir})
			require.NoError(t, err)
			ic, _, err := ingress.ConfigFromCLI(cli, e.LookupEnv, false)
			require.NoError(t, err, name)
			iw, err := ic.Validate()
			require.NoError(t, err, name)
			require.Empty(t, iw, "%s: the webhook receiver warns", name)
			require.Equal(t, cfg.Repos, ic.Repositories)
		})
	}
}
