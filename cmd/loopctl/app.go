package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/buildinfo"
	"github.com/theloop-dev/theloop/loop"
)

// version is stamped at build time:
//
//	go build -ldflags "-X main.version=v1.2.3" ./cmd/loopctl
var version = ""

// Exit codes.
const (
	exitOK      = 0
	exitFailed  = 1 // a check failed, a claim blocked, a verification found a violation
	exitRefused = 2 // bad usage, or an override refused (no reason, unknown node)
)

// IOStreams are the process's streams.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// Factory is the outside world a command may use. Tests build their own.
type Factory struct {
	IO      IOStreams
	Getenv  func(string) string
	Getwd   func() (string, error)
	HomeDir func() (string, error)
	Clock   graph.Clock
	// Integrations builds the outbound integrations for live verbs (nil:
	// none). It receives the CLI config's raw integrations block.
	Integrations func(cfg *loop.CLIConfig, sink graph.Sink) (graph.Integrations, []string, error)
	// IsTerminal reports whether w is a terminal, for colour (nil: stdout
	// is checked; tests pretend).
	IsTerminal func(w io.Writer) bool
}

func systemFactory() *Factory {
	return &Factory{
		IO:           IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr},
		Getenv:       os.Getenv,
		Getwd:        os.Getwd,
		HomeDir:      os.UserHomeDir,
		Clock:        graph.SystemClock{},
		Integrations: buildIntegrations,
	}
}

// exitError carries an exit code for an outcome that is not a program error
// (a failed check, a refused override); its message, if any, goes to
// stderr.
type exitError struct {
	code int
	msg  string
}

func (e *exitError) Error() string { return e.msg }

func failWith(code int, format string, args ...any) error {
	return &exitError{code: code, msg: fmt.Sprintf(format, args...)}
}

// versionString is the stamped version, else the module's build info.
func versionString() string { return buildinfo.Version(version) }

// newApp assembles the command tree.
func newApp(f *Factory) *cli.App {
	cmds := make([]*cli.Command, len(topCommands))
	for i, tc := range topCommands {
		cmds[i] = tc.build(f)
	}
	return appWith(f, cmds)
}

// newAppFor builds only the top-level command argv names, when it names
// one: every loopctl process used to construct all ~80 verbs, their flags
// and help text (~50 page faults, a tenth of `loopctl --version`'s start)
// to run one. Anything else — no verb, a flag first, help, completion, an
// unknown word — gets the whole tree, so help and "did you mean" see every
// verb.
func newAppFor(f *Factory, argv []string) *cli.App {
	if len(argv) > 1 {
		for _, tc := range topCommands {
			if tc.name == argv[1] {
				return appWith(f, []*cli.Command{tc.build(f)})
			}
		}
	}
	if len(argv) == 2 && (argv[1] == "--version" || argv[1] == "-v") {
		return appWith(f, nil)
	}
	return newApp(f)
}

// topCommands are loopctl's verbs in the order help lists them, by name
// (TestTopCommandsNameWhatTheyBuild keeps each name equal to what its
// constructor builds, and none has an alias).
var topCommands = []struct {
	name  string
	build func(*Factory) *cli.Command
}{
	{"check", func(f *Factory) *cli.Command { return newCheckCmd(f, nil) }},
	{"graph", newGraphCmd},
	{"events", func(f *Factory) *cli.Command { return newEventsCmd(f, nil) }},
	{"demo", func(f *Factory) *cli.Command { return newDemoCmd(f, nil) }},
	{"install", func(f *Factory) *cli.Command { return newInstallCmd(f, nil) }},
	{"uninstall", func(f *Factory) *cli.Command { return newUninstallCmd(f, nil) }},
	{"dashboard", func(f *Factory) *cli.Command { return newDashboardCmd(f, nil) }},
	{"completion", newCompletionCmd},
	{"sessions", newSessionsCmd},
	{"attention", newAttentionCmd},
	{"usage", newUsageCmd},
	{"daemon", func(f *Factory) *cli.Command { return newDaemonCmd(f, nil) }},
	{"queue", func(f *Factory) *cli.Command { return newQueueCmd(f, nil) }},
	{"config", newConfigCmd},
	{"github", newGitHubCmd},
	{"keys", newKeysCmd},
	{"verify-decisions", newVerifyDecisionsCmd},
	{"ask", newAskCmd},
	{"critic", func(f *Factory) *cli.Command { return newCriticCmd(f, nil) }},
	{"scenarios", newScenariosCmd},
	{"instructions", newInstructionsCmd},
	{"mcp", func(*Factory) *cli.Command { return movedMCPCmd() }},
}

func appWith(f *Factory, cmds []*cli.Command) *cli.App {
	app := &cli.App{
		Name:            "loopctl",
		Usage:           "walk work items through theloop's process graph",
		Version:         versionString(),
		HideHelpCommand: true,
		Writer:          f.IO.Out,
		ErrWriter:       f.IO.ErrOut,
		Reader:          f.IO.In,
		Description: `theloop makes a product-development lifecycle an explicit graph: each node has
entry and exit hook chains, and a work item moves only when the current node's
exit chain passes. loopctl is how an agent reports work done (graph complete),
how CI gates a pull request (check --recompute --fail-on block), and how an
operator inspects, forces and skips.

Try it without a GitHub account:  loopctl demo
The MCP tools on stdio, for a harness: loopd mcp (formerly loopctl mcp).`,
		Commands:       cmds,
		ExitErrHandler: func(*cli.Context, error) {},
	}
	installUsage(app)
	return app
}

// movedMCPCmd is the hidden `loopctl mcp`: the MCP server on stdio moved to
// `loopd mcp` so that loopctl, run on every claim and CI check, does not
// link the MCP SDK. A harness registered with the old command is told the
// new one rather than "no such command".
func movedMCPCmd() *cli.Command {
	return &cli.Command{
		Name:            "mcp",
		Hidden:          true,
		SkipFlagParsing: true,
		Action: func(*cli.Context) error {
			return failWith(exitRefused, `loopctl mcp moved to loopd mcp (same tools, same CLI config): register {"command": "loopd", "args": ["mcp"]} in .mcp.json`)
		},
	}
}

// Main runs loopctl with argv (argv[0] is the program name) and returns the
// exit code.
func Main(argv []string, f *Factory) int {
	return mainWith(newAppFor(f, argv), argv, f)
}

// mainWith runs an assembled app (tests swap in commands that only parse).
func mainWith(app *cli.App, argv []string, f *Factory) int {
	if len(argv) > 1 && argv[1] == completeVerb {
		complete(app, f, argv[2:])
		return exitOK
	}
	argv, err := rewriteArgv(app, argv)
	if err == nil {
		err = app.RunContext(context.Background(), permute(app, argv))
	}
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.msg != "" {
			fmt.Fprintln(f.IO.ErrOut, ee.msg)
		}
		return ee.code
	}
	var ce cli.ExitCoder
	if errors.As(err, &ce) {
		if msg := err.Error(); msg != "" {
			fmt.Fprintln(f.IO.ErrOut, "loopctl:", msg)
		}
		return ce.ExitCode()
	}
	fmt.Fprintln(f.IO.ErrOut, "loopctl:", err)
	if isUsageError(err) {
		return exitRefused
	}
	return exitFailed
}

func isUsageError(err error) bool {
	s := err.Error()
	for _, p := range []string{"flag provided but not defined", "Required flag", "invalid value", "flag needs an argument", "No help topic", "unknown command"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// permute moves each command's flags ahead of its positional arguments, so
// `loopctl check issue-42 --recompute` reads like `loopctl check
// --recompute issue-42` (urfave/cli stops parsing flags at the first
// argument). Everything after "--" is left alone.
func permute(app *cli.App, argv []string) []string {
	if len(argv) < 2 {
		return argv
	}
	out := []string{argv[0]}
	cmds := app.Commands
	flags := app.Flags
	i := 1
	// Walk down the command path.
	for i < len(argv) {
		a := argv[i]
		if strings.HasPrefix(a, "-") {
			break
		}
		var next *cli.Command
		for _, c := range cmds {
			if c.Name == a || slices.Contains(c.Aliases, a) {
				next = c
				break
			}
		}
		if next == nil {
			break
		}
		out = append(out, a)
		cmds, flags = next.Subcommands, next.Flags
		i++
	}
	var fl, pos []string
	for ; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			pos = append(pos, argv[i:]...)
			break
		}
		if !strings.HasPrefix(a, "-") || a == "-" {
			pos = append(pos, a)
			continue
		}
		fl = append(fl, a)
		if !strings.Contains(a, "=") && takesValue(flags, strings.TrimLeft(a, "-")) && i+1 < len(argv) {
			i++
			fl = append(fl, argv[i])
		}
	}
	return append(append(out, fl...), pos...)
}

func takesValue(flags []cli.Flag, name string) bool {
	for _, f := range flags {
		for _, n := range f.Names() {
			if n == name {
				if tv, ok := f.(interface{ TakesValue() bool }); ok {
					return tv.TakesValue()
				}
				return false
			}
		}
	}
	return false
}

// noArgs refuses stray positional arguments for a verb that takes none, so
// that `loopctl events issue-239` does not silently list every item's events.
func noArgs(c *cli.Context, verb, hint string) error {
	if c.NArg() == 0 {
		return nil
	}
	msg := fmt.Sprintf("loopctl %s: unexpected argument %q; %s takes no arguments", verb, c.Args().First(), verb)
	if hint != "" {
		msg += " (" + hint + ")"
	}
	return failWith(exitRefused, "%s", msg)
}
