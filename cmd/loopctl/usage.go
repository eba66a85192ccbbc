package main

import (
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop"
)

// Usage handling, one place for every verb: an unknown verb or flag is bad
// usage (exit 2) with a "did you mean", said on stderr in one line — never
// the help text on stdout, where an agent parsing JSON would read it;
// `help VERB...` and `version` are verbs like any other (exit 0).

// installUsage wires the usage rules into every command of app.
func installUsage(app *cli.App) {
	app.OnUsageError = func(c *cli.Context, err error, _ bool) error {
		return usageError(nil, app.Flags, err)
	}
	app.Action = func(c *cli.Context) error {
		if c.NArg() > 0 {
			return unknownCommand(nil, app.Commands, c.Args().First())
		}
		return cli.ShowAppHelp(c)
	}
	var walk func(path []string, cmds []*cli.Command)
	walk = func(path []string, cmds []*cli.Command) {
		for _, cmd := range cmds {
			p := append(slices.Clone(path), cmd.Name)
			cmd.OnUsageError = func(c *cli.Context, err error, _ bool) error {
				return usageError(p, cmd.Flags, err)
			}
			if len(cmd.Subcommands) > 0 && cmd.Action == nil {
				subs := cmd.Subcommands
				cmd.Action = func(c *cli.Context) error {
					if c.NArg() > 0 {
						return unknownCommand(p, subs, c.Args().First())
					}
					return cli.ShowSubcommandHelp(c)
				}
			}
			walk(p, cmd.Subcommands)
		}
	}
	walk(nil, app.Commands)
}

// rewriteArgv turns `help VERB...` into `VERB... --help` and `version` into
// `--version`. An unknown verb after help is refused like any other.
func rewriteArgv(app *cli.App, argv []string) ([]string, error) {
	if len(argv) < 2 {
		return argv, nil
	}
	switch argv[1] {
	case "version":
		if len(argv) > 2 {
			return nil, failWith(exitRefused, "loopctl version: unexpected argument %q; version takes no arguments", argv[2])
		}
		return []string{argv[0], "--version"}, nil
	case "help":
		path := argv[2:]
		cmds := app.Commands
		for i, name := range path {
			cmd := findCommand(cmds, name)
			if cmd == nil {
				return nil, unknownCommand(path[:i], cmds, name)
			}
			cmds = cmd.Subcommands
		}
		return append(append([]string{argv[0]}, path...), "--help"), nil
	}
	return argv, nil
}

func findCommand(cmds []*cli.Command, name string) *cli.Command {
	for _, c := range cmds {
		if c.Name == name || slices.Contains(c.Aliases, name) {
			return c
		}
	}
	return nil
}

func commandNames(cmds []*cli.Command) []string {
	var names []string
	for _, c := range cmds {
		if !c.Hidden {
			names = append(names, c.Name)
		}
	}
	return names
}

// unknownCommand is the refusal of an unknown verb under path.
func unknownCommand(path []string, cmds []*cli.Command, name string) error {
	where := strings.Join(append([]string{"loopctl"}, path...), " ")
	names := commandNames(cmds)
	if near := loop.Nearest(name, names); len(near) > 0 {
		return failWith(exitRefused, "%s: unknown command %q; did you mean %s? (run '%s --help')", where, name, strings.Join(near, " or "), where)
	}
	return failWith(exitRefused, "%s: unknown command %q; commands are: %s (run '%s --help')", where, name, strings.Join(names, ", "), where)
}

// usageError is the refusal of a flag error, with a suggestion for a
// misspelt flag.
func usageError(path []string, flags []cli.Flag, err error) error {
	where := strings.Join(append([]string{"loopctl"}, path...), " ")
	msg := err.Error()
	if bad, ok := strings.CutPrefix(msg, "flag provided but not defined: "); ok {
		name := strings.TrimLeft(bad, "-")
		var names []string
		for _, f := range flags {
			for _, n := range f.Names() {
				if len(n) > 1 {
					names = append(names, n)
				}
			}
		}
		if near := loop.Nearest(name, names); len(near) > 0 {
			for i := range near {
				near[i] = "--" + near[i]
			}
			return failWith(exitRefused, "%s: unknown flag --%s; did you mean %s? (run '%s --help')", where, name, strings.Join(near, " or "), where)
		}
		return failWith(exitRefused, "%s: unknown flag --%s (run '%s --help')", where, name, where)
	}
	return failWith(exitRefused, "%s: %s (run '%s --help')", where, msg, where)
}
