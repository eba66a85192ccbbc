package main

import (
	"testing"

	"github.com/stretchr/testify/require"
	"github.com/urfave/cli/v2"
)

// TestTopCommandsNameWhatTheyBuild: newAppFor picks a verb's constructor by
// the name in topCommands, so that name must be the built command's, and
// no top-level verb may have an alias the lookup would miss.
func TestTopCommandsNameWhatTheyBuild(t *testing.T) {
	f, _ := testFactory(t, t.TempDir(), nil)
	seen := map[string]bool{}
	for _, tc := range topCommands {
		c := tc.build(f)
		require.Equal(t, tc.name, c.Name)
		require.Empty(t, c.Aliases, "top-level verb %s has aliases; newAppFor looks verbs up by name only", c.Name)
		require.False(t, seen[tc.name], "%s listed twice", tc.name)
		seen[tc.name] = true
	}
	require.Len(t, newAppFor(f, []string{"loopctl", "graph", "complete", "issue-42"}).Commands, 1, "a named verb builds only that verb")
	require.Empty(t, newAppFor(f, []string{"loopctl", "--version"}).Commands, "--version builds no verb")
	require.Len(t, newAppFor(f, []string{"loopctl", "--help"}).Commands, len(topCommands))
}

// TestOneVerbAppAnswersLikeTheWholeTree: for every verb path, --help and a
// bad flag print the same through the one-verb app as through the whole
// tree, with the same exit code; no verb, --version and an unknown verb are
// unchanged too.
func TestOneVerbAppAnswersLikeTheWholeTree(t *testing.T) {
	run := func(app *cli.App, argv []string) (int, string, string) {
		f, io := testFactory(t, t.TempDir(), nil)
		app.Writer, app.ErrWriter = f.IO.Out, f.IO.ErrOut
		code := mainWith(app, append([]string{"loopctl"}, argv...), f)
		return code, io.out.String(), io.err.String()
	}
	f, _ := testFactory(t, t.TempDir(), nil)
	var paths [][]string
	var walk func(prefix []string, cmds []*cli.Command)
	walk = func(prefix []string, cmds []*cli.Command) {
		for _, c := range cmds {
			p := append(append([]string(nil), prefix...), c.Name)
			paths = append(paths, p)
			walk(p, c.Subcommands)
		}
	}
	walk(nil, newApp(f).Commands)
	require.Greater(t, len(paths), 40)
	var argvs [][]string
	for _, p := range paths {
		argvs = append(argvs, append(append([]string(nil), p...), "--help"), append(append([]string(nil), p...), "--no-such-flag"))
	}
	argvs = append(argvs, []string{}, []string{"--version"}, []string{"version"}, []string{"chekc"}, []string{"help", "graph"})
	for _, argv := range argvs {
		full := append([]string{"loopctl"}, argv...)
		fw, _ := testFactory(t, t.TempDir(), nil)
		fl, _ := testFactory(t, t.TempDir(), nil)
		wc, wo, we := run(newApp(fw), argv)
		lc, lo, le := run(newAppFor(fl, full), argv)
		require.Equal(t, wc, lc, "%v: exit code", argv)
		require.Equal(t, wo, lo, "%v: stdout", argv)
		require.Equal(t, we, le, "%v: stderr", argv)
	}
}
