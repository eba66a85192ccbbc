package main

import (
	"io/fs"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/plugin"
)

// pendingVerbs are loopctl verbs the plugin's prose names before this
// binary has them, with the issue that adds each. The test fails once a
// pending verb exists, so the list cannot go stale.
var pendingVerbs = map[string]string{}

// codeSpan matches an inline code span or one line of a fenced block that
// starts with loopctl; the hooks' one-line reminder is matched up to its
// sentence's end.
var (
	codeSpan     = regexp.MustCompile("`(loopctl [^`\n]+)`")
	reminderSpan = regexp.MustCompile(`loopctl [a-z][a-z -]*[a-z] <id>`)
)

// pluginInvocations collects every loopctl command line the plugin's text
// shows an agent, by file.
func pluginInvocations(t *testing.T) map[string][]string {
	t.Helper()
	files := map[string]string{"cursor/the-loop.mdc": string(plugin.CursorRule())}
	require.NoError(t, fs.WalkDir(plugin.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(plugin.Files(), p)
		files[p] = string(b)
		return err
	}))
	out := map[string][]string{}
	for name, text := range files {
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			out[name] = append(out[name], m[1])
		}
		if name == plugin.HooksPath {
			out[name] = append(out[name], reminderSpan.FindAllString(text, -1)...)
		}
	}
	return out
}

// resolveVerb walks the command tree along the words of a command line; it
// returns the command reached, the verb path, and the remaining tokens.
func resolveVerb(app *cli.App, words []string) (*cli.Command, []string, []string) {
	var cur *cli.Command
	cmds := app.Commands
	var path []string
	i := 0
	for ; i < len(words); i++ {
		var next *cli.Command
		for _, c := range cmds {
			if c.Name == words[i] || slices.Contains(c.Aliases, words[i]) {
				next = c
			}
		}
		if next == nil {
			break
		}
		cur, cmds = next, next.Subcommands
		path = append(path, words[i])
	}
	return cur, path, words[i:]
}

func hasFlag(c *cli.Command, name string) bool {
	for _, f := range c.Flags {
		if slices.Contains(f.Names(), name) {
			return true
		}
	}
	return name == "help" || name == "h"
}

// TestPluginLoopctlInvocationsParse: every `loopctl …` the plugin tells an
// agent to run names a real verb with real flags, and `--help` on it
// succeeds.
func TestPluginLoopctlInvocationsParse(t *testing.T) {
	f, _ := testFactory(t, t.TempDir(), nil)
	app := newApp(f)
	seen := map[string]bool{}
	total := 0
	for file, lines := range pluginInvocations(t) {
		for _, line := range lines {
			total++
			words := strings.Fields(strings.TrimPrefix(line, "loopctl "))
			cmd, path, rest := resolveVerb(app, words)
			if len(words) > 0 {
				if why, ok := pendingVerbs[words[0]]; ok {
					require.Nil(t, cmd, "%s: loopctl %s exists now; remove it from pendingVerbs", file, words[0])
					t.Logf("%s: %q names a verb this binary does not have yet: %s", file, line, why)
					continue
				}
			}
			require.NotNil(t, cmd, "%s: %q names no loopctl verb", file, line)
			require.Empty(t, cmd.Subcommands, "%s: %q stops at a command group (%s); name the verb", file, line, strings.Join(path, " "))
			for _, tok := range rest {
				if name, ok := strings.CutPrefix(tok, "--"); ok {
					name, _, _ = strings.Cut(name, "=")
					require.True(t, hasFlag(cmd, name), "%s: %q: loopctl %s has no flag --%s", file, line, strings.Join(path, " "), name)
				} else if name, ok := strings.CutPrefix(tok, "-"); ok && len(name) == 1 {
					require.True(t, hasFlag(cmd, name), "%s: %q: loopctl %s has no flag -%s", file, line, strings.Join(path, " "), name)
				}
			}
			key := strings.Join(path, " ")
			if seen[key] {
				continue
			}
			seen[key] = true
			hf, hio := testFactory(t, t.TempDir(), nil)
			code := Main(append(append([]string{"loopctl"}, path...), "--help"), hf)
			require.Equal(t, 0, code, "loopctl %s --help: %s", key, hio.err.String())
			require.Contains(t, hio.out.String(), "loopctl "+key, "loopctl %s --help prints its usage", key)
		}
	}
	require.Greater(t, total, 20, "the extractor found too few invocations to be working")
	for _, must := range []string{"graph complete", "check"} {
		require.True(t, seen[must], "the plugin never shows `loopctl %s`", must)
	}
}
