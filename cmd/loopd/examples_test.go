package main

import (
	"io/fs"
	"os"
	osexec "os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop/daemon"
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
			vars := map[string]string{daemon.DefaultSecretEnv: "s3cret", "GH_TOKEN": "tok", "THE_LOOP_NATS_PASSWORD": "nats-pw"}
			e, _, _ := testEnv(t, vars)

			cfg, warns, err := loadConfig(e, runOptions{Config: path}, dir)
			require.NoError(t, err, "%s does not load", name)
			require.Empty(t, warns, "%s: loopd warns", name)
			require.NoError(t, cfg.Validate(), name)
			require.NotEmpty(t, cfg.Repositories, "%s serves no repository: every event would be dropped (repository-not-bound)", name)

			ic := daemon.IngressConfig(cfg)
			iw, err := ic.Validate()
			require.NoError(t, err, name)
			require.Empty(t, iw, "%s: the webhook receiver warns", name)
			require.Equal(t, cfg.Repositories, ic.Repositories)
		})
	}
}

// unitDirectives reads a systemd unit's Key=Value lines (the last value of a
// key wins, as systemd does for the single-valued ones this test reads;
// ReadWritePaths-like lists accumulate).
func unitDirectives(t *testing.T, path string) map[string][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	out := map[string][]string{}
	for _, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || line[0] == '#' || line[0] == ';' || line[0] == '[' {
			continue
		}
		k, v, ok := strings.Cut(line, "=")
		if ok {
			out[k] = append(out[k], strings.Fields(v)...)
		}
	}
	return out
}

// under reports whether p is dir or inside it.
func under(p, dir string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, "../")
}

// The shipped unit starts as shipped: every path the example config makes
// loopd write is under the StateDirectory= systemd creates (a
// ReadWritePaths= naming a directory nothing creates fails the start with
// 226/NAMESPACE); the config it names is in the ConfigurationDirectory=;
// the agents' tmux socket is outside the private /tmp, and the attach
// command loopd posts names it with -S; the unit's install steps put loopd
// where ExecStart runs it (and loop-gate beside it); loopd.env.example marks
// the credentials as required; and the real systemd-analyze verify accepts
// the unit as those steps leave it.
func TestSystemdUnitAsShipped(t *testing.T) {
	unitPath := filepath.Join("..", "..", "examples", "systemd", "loopd.service")
	u := unitDirectives(t, unitPath)
	require.Len(t, u["StateDirectory"], 1, "StateDirectory= makes /var/lib/<name> before loopd starts")
	require.Len(t, u["ConfigurationDirectory"], 1, "ConfigurationDirectory= makes /etc/<name>")
	state := filepath.Join("/var/lib", u["StateDirectory"][0])
	conf := filepath.Join("/etc", u["ConfigurationDirectory"][0])
	for _, key := range []string{"ReadWritePaths", "ReadOnlyPaths", "InaccessiblePaths"} {
		for _, p := range u[key] {
			p = strings.TrimLeft(p, "-+")
			require.True(t, under(p, state) || under(p, conf), "%s=%s: nothing creates it, and a missing path fails the start (226/NAMESPACE)", key, p)
		}
	}

	exec := u["ExecStart"]
	require.NotEmpty(t, exec)
	flag := func(name string) string {
		for i, a := range exec {
			if a == name && i+1 < len(exec) {
				return exec[i+1]
			}
		}
		return ""
	}
	configPath, stateRoot := flag("--config"), flag("--state-root")
	require.True(t, under(configPath, conf), "--config %s is in %s", configPath, conf)
	require.True(t, under(stateRoot, state), "--state-root %s is under %s", stateRoot, state)

	content, err := os.ReadFile(filepath.Join("..", "..", "examples", "systemd", "cli-config.yaml"))
	require.NoError(t, err)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "cli-config.yaml")
	require.NoError(t, os.WriteFile(cfgFile, content, 0o600))
	e, _, _ := testEnv(t, map[string]string{daemon.DefaultSecretEnv: "s3cret"})
	cfg, _, err := loadConfig(e, runOptions{Config: cfgFile, StateRoot: stateRoot}, dir)
	require.NoError(t, err)
	for what, p := range map[string]string{
		"state root": cfg.StateRoot, "routing.workspace.root": cfg.Routing.WorkspaceRoot,
		"routing.tmux.socketPath": cfg.Tmux.SocketPath, "eventLog.path": cfg.EventLog.Path,
	} {
		require.NotEmpty(t, p, what)
		require.True(t, under(p, state), "%s %s is outside %s, the only tree the unit lets loopd write", what, p, state)
	}
	if slices.Contains(u["PrivateTmp"], "yes") {
		require.False(t, under(cfg.Tmux.SocketPath, "/tmp"), "under PrivateTmp a socket in /tmp is out of the operator's reach")
	}

	// The unit's own install steps put loopd where ExecStart runs it: play
	// them under a scratch root (the build step by the test's built loopd).
	unit, err := os.ReadFile(unitPath)
	require.NoError(t, err)
	scratch := t.TempDir()
	built := map[string]bool{}
	for _, line := range strings.Split(string(unit), "\n") {
		step := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "#"))
		if len(step) > 3 && step[0] == "go" && step[1] == "build" && step[2] == "-o" {
			for _, pkg := range step[4:] {
				built[step[3]+filepath.Base(pkg)] = true
			}
		}
		if len(step) > 3 && step[0] == "sudo" && step[1] == "install" && strings.HasSuffix(step[len(step)-1], "/") {
			dest := filepath.Join(scratch, step[len(step)-1])
			require.NoError(t, os.MkdirAll(dest, 0o755))
			for _, src := range step[2 : len(step)-1] {
				if built[src] && filepath.Base(src) == "loopd" {
					b, err := os.ReadFile(loopdBinary(t))
					require.NoError(t, err)
					require.NoError(t, os.WriteFile(filepath.Join(dest, "loopd"), b, 0o755))
				} else if built[src] {
					require.NoError(t, os.WriteFile(filepath.Join(dest, filepath.Base(src)), []byte("#!/bin/sh\n"), 0o755))
				}
			}
		}
	}
	require.True(t, filepath.IsAbs(exec[0]), "ExecStart=%s", exec[0])
	installed := filepath.Join(scratch, exec[0])
	require.FileExists(t, installed, "the unit's install steps put nothing at ExecStart's %s", exec[0])
	require.FileExists(t, filepath.Join(filepath.Dir(installed), "loop-gate"), "the agents' Stop hook needs loop-gate on the service's PATH")

	// The environment file marks what loopd cannot start without.
	envExample, err := os.ReadFile(filepath.Join("..", "..", "examples", "systemd", "loopd.env.example"))
	require.NoError(t, err)
	for _, name := range []string{daemon.DefaultSecretEnv, "GH_TOKEN"} {
		require.Regexp(t, "(?m)^# REQUIRED:[^\n]*\n(#[^\n]*\n)*"+name+"=", string(envExample), "loopd.env.example marks %s as required", name)
	}

	if _, err := osexec.LookPath("systemd-analyze"); err != nil {
		t.Skip("systemd-analyze is not installed (Debian package systemd; .ci/run installs it): the unit's syntax is not verified")
	}
	vdir := t.TempDir()
	verified := filepath.Join(vdir, "loopd.service")
	require.NoError(t, os.WriteFile(verified, []byte(strings.ReplaceAll(string(unit), exec[0], installed)), 0o644))
	cmd := osexec.Command("systemd-analyze", "verify", verified)
	cmd.Env = append(os.Environ(), "SYSTEMD_LOG_LEVEL=notice")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "systemd-analyze verify: %s", out)
	require.Empty(t, strings.TrimSpace(string(out)), "systemd-analyze verify has no complaint")
}
