package main

import (
	"errors"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/plugin/install"
)

// The install verbs map flags into install.Options; package plugin/install
// does the work.

func newInstallCmd(f *Factory, runF func(*install.Options) error) *cli.Command {
	return &cli.Command{
		Name:  "install",
		Usage: "install theloop's plugin and Stop gate for Claude Code, Cursor, the Codex CLI or the Gemini CLI",
		Description: `For Claude Code at user scope, install writes theloop's plugin "the-loop"
(the skill, the /the-loop: commands, a SessionStart reminder and loop-gate as
the Stop hook) into a local marketplace under $XDG_DATA_HOME/theloop
(~/.local/share/theloop), registers it in ~/.claude/settings.json
(extraKnownMarketplaces, enabledPlugins) and, when the claude CLI is on PATH,
installs it there at once. A loop-gate Stop hook left in the settings by an
earlier install moves into the plugin. A new loopctl version replaces the
plugin's files (its version carries their hash).

--scope project writes files your team commits, so it writes only what holds
in a teammate's checkout: the gate, as "loop-gate <harness>" from PATH (or,
for a --command inside the repository, a path relative to the project:
"$CLAUDE_PROJECT_DIR"/bin/loop-gate, $GEMINI_PROJECT_DIR/bin/loop-gate). A
--command in your home directory is refused there. For Claude Code the
commands and the skill are per person (--scope user); for the Codex and Gemini
CLIs their packaging goes in your home directory whatever the scope. install
warns when the CLI will not load a project's hooks on its own (Gemini and
Codex load them only in a folder you trusted; Codex runs a new hook only once
you trusted it with /hooks).

For Cursor, install writes the stop hook below and, with --scope project, the
rule .cursor/rules/the-loop.mdc.

For the Codex CLI, install writes the Stop hook below and the plugin
"the-loop" (the skill, and each /the-loop: command as a skill) into a local
marketplace under $XDG_DATA_HOME/theloop/codex-marketplace; when codex is on
PATH it turns Codex's hooks feature on if it is off (saying so) and runs
codex plugin marketplace add / codex plugin add. Codex runs a new hook only
after you trust it (/hooks in codex).

For the Gemini CLI, install writes the AfterAgent hook below and the
extension "the-loop" (the skill and the /the-loop: commands) into
~/.gemini/extensions/the-loop, where the CLI loads it.

loop-gate runs whenever the agent is about to stop. While the work item's
current node blocks, loop-gate keeps the agent working (at most three times in a row per
node); at a human gate, or in a session that is not theloop's, it lets the
agent stop.

  Claude Code  ~/.claude/settings.json (user): enables the-loop@theloop,
               whose Stop hook runs "loop-gate claude"; or
               <repo>/.claude/settings.json (project): hooks.Stop runs
               "loop-gate claude"
  Cursor       ~/.cursor/hooks.json (user) or <repo>/.cursor/hooks.json
               (project): hooks.stop runs "loop-gate cursor"
  Codex CLI    ~/.codex/hooks.json ($CODEX_HOME) or <repo>/.codex/hooks.json:
               hooks.Stop runs "loop-gate codex"
  Gemini CLI   ~/.gemini/settings.json or <repo>/.gemini/settings.json:
               hooks.AfterAgent runs "loop-gate gemini"

Everything else in the file is kept (keys, order, values; the file is
re-indented with two spaces only when something must change). Running it
again changes nothing; an existing loop-gate entry is updated in place. A file
that is not valid JSON is refused, never overwritten.

Examples:
   loopctl install
   loopctl install --harness cursor --scope project --dry-run
   loopctl install --harness codex
   loopctl install --harness gemini --scope project
   loopctl install --command /usr/local/bin/loop-gate`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "harness", Value: harness.Default().Name, Usage: harness.List(harness.Names())},
			&cli.StringFlag{Name: "scope", Value: "user", Usage: "user (your home directory: every session) or project (this repository's checkout)"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the change as a diff and write nothing"},
			&cli.StringFlag{Name: "command", Value: "loop-gate", Usage: "the loop-gate program (a name on the harness's PATH, or an absolute path)", TakesFile: true},
			&cli.StringFlag{Name: "repo", Usage: "the repository for --scope project (default: the one holding the current directory)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return failWith(exitRefused, "loopctl install: takes no arguments; got %s", strings.Join(c.Args().Slice(), " "))
			}
			opts := &install.Options{IO: install.IOStreams{Out: f.IO.Out, ErrOut: f.IO.ErrOut}, Env: &install.Env{Getenv: f.Getenv, Getwd: f.Getwd, HomeDir: f.HomeDir}, Harness: c.String("harness"), Scope: c.String("scope"),
				DryRun: c.Bool("dry-run"), Command: c.String("command"), CommandSet: c.IsSet("command"), Repo: c.String("repo")}
			if err := installErr(opts.CheckFlags("install", true)); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return installErr(install.Install(opts))
		},
	}
}

func newUninstallCmd(f *Factory, runF func(*install.Options) error) *cli.Command {
	return &cli.Command{
		Name:  "uninstall",
		Usage: "undo loopctl install: the plugin and Stop gate of Claude Code, Cursor, the Codex CLI or the Gemini CLI",
		Description: `uninstall removes what install added and nothing else: for Claude Code the
theloop marketplace entry, the enabledPlugins key and any loop-gate Stop hook
(and, at user scope, the marketplace directory); for Cursor the loop-gate stop
hook and, in a project, the rule file when it is still the one install wrote;
for the Codex and Gemini CLIs the loop-gate hook and the plugin (codex plugin
remove, the marketplace directory) or the extension directory in your home —
also when the hook is gone already — unless a user-scope install still uses
it. Every other setting is kept byte for byte; in a repository, a file left
empty that git does not track is removed with the directories install made
for it, so git status is as before install. Each removal is reported.

Examples:
   loopctl uninstall
   loopctl uninstall --harness cursor --scope project --dry-run
   loopctl uninstall --harness codex`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "harness", Value: harness.Default().Name, Usage: harness.List(harness.Names())},
			&cli.StringFlag{Name: "scope", Value: "user", Usage: "user or project"},
			&cli.BoolFlag{Name: "dry-run", Usage: "print the change and write nothing"},
			&cli.StringFlag{Name: "repo", Usage: "the repository for --scope project (default: the one holding the current directory)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return failWith(exitRefused, "loopctl uninstall: takes no arguments; got %s", strings.Join(c.Args().Slice(), " "))
			}
			opts := &install.Options{IO: install.IOStreams{Out: f.IO.Out, ErrOut: f.IO.ErrOut}, Env: &install.Env{Getenv: f.Getenv, Getwd: f.Getwd, HomeDir: f.HomeDir}, Harness: c.String("harness"), Scope: c.String("scope"), DryRun: c.Bool("dry-run"), Repo: c.String("repo")}
			if err := installErr(opts.CheckFlags("uninstall", false)); err != nil {
				return err
			}
			if runF != nil {
				return runF(opts)
			}
			return installErr(install.Uninstall(opts))
		},
	}
}

// installErr carries an install.Error's exit code over to loopctl's.
func installErr(err error) error {
	var ie *install.Error
	if errors.As(err, &ie) {
		return failWith(ie.Code, "%s", ie.Msg)
	}
	return err
}
