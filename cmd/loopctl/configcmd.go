package main

import (
	"fmt"
	"maps"
	"os"
	"slices"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/loop"
)

func newConfigCmd(f *Factory) *cli.Command {
	cfgFlag := &cli.StringFlag{Name: "config", Usage: "the operator's cli-config.yaml (default: $THE_LOOP_CLI_CONFIG, ./.the-loop/cli-config.yaml, ~/.the-loop/cli-config.yaml)", TakesFile: true}
	return &cli.Command{
		Name:  "config",
		Usage: "the operator's configuration: its JSON Schema, the effective values, migration of old files",
		Subcommands: []*cli.Command{
			{
				Name:        "schema",
				Usage:       "print the JSON Schema of cli-config.yaml (for editors: yaml-language-server)",
				Description: "Example:\n   loopctl config schema > cli-config.schema.json",
				Action: func(c *cli.Context) error {
					_, err := f.IO.Out.Write(loop.CLIConfigSchema())
					return err
				},
			},
			{
				Name:        "show",
				Usage:       "print every key's effective value and where it comes from (file, default, environment)",
				Description: "Example:\n   loopctl config show --jq '.[] | select(.source == \"file\") | .key'",
				Flags:       []cli.Flag{cfgFlag, &cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"}, outputFlags()[0], outputFlags()[1]},
				Action: func(c *cli.Context) error {
					format := c.String("format")
					if format != "table" && format != "json" {
						return failWith(exitRefused, "loopctl config show: --format must be table or json, not %q", format)
					}
					out, err := readOutput(c, "config show", &format)
					if err != nil {
						return err
					}
					cfg, err := f.cliConfig(c.String("config"), "")
					if err != nil {
						return failWith(exitRefused, "loopctl config show: %v", err)
					}
					return runConfigShow(f, cfg, format, out)
				},
			},
			{
				Name:  "harness",
				Usage: "what theloop reads of the repository's .the-loop/harness-config.yaml, and a warning for every key it does not read, with what it does instead",
				Description: `Reads the whole harness config (a repository moved from the Python the-loop
keeps its file) and prints the keys theloop reads with their values, then one
warning per key it ignores, naming the key and what theloop does instead.
tooling.unitTest is read as verification.testCommand when that is absent, and
tooling.lint.markdown as the markdown linter lint-artifacts runs.

Examples:
   loopctl config harness
   loopctl config harness --format json --jq '.unread[].key'`,
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "repo", Usage: "repository root (default: found from the current directory upwards, as git does)"},
					&cli.StringFlag{Name: "format", Value: "table", Usage: "table or json"}, outputFlags()[0], outputFlags()[1],
				},
				Action: func(c *cli.Context) error {
					format := c.String("format")
					if format != "table" && format != "json" {
						return failWith(exitRefused, "loopctl config harness: --format must be table or json, not %q", format)
					}
					out, err := readOutput(c, "config harness", &format)
					if err != nil {
						return err
					}
					root, err := f.repoRoot(repoFlags{Repo: c.String("repo")})
					if err != nil {
						return err
					}
					rep, err := loop.ReportHarnessConfig(root)
					if err != nil {
						return failWith(exitRefused, "loopctl config harness: %v", err)
					}
					return runConfigHarness(f, rep, format, out)
				},
			},
			{
				Name:        "migrate",
				Usage:       "rewrite an old cli-config.yaml into the current shape, keeping its comments and key order, the original saved as FILE.bak; lists every key moved and every retired key removed (deterministic, idempotent); --dry-run only reports",
				Description: "Example:\n   loopctl config migrate --dry-run --config ~/.config/the-loop/cli-config.yaml",
				Flags:       []cli.Flag{cfgFlag, &cli.BoolFlag{Name: "dry-run", Usage: "report the changes and print the result; write nothing"}},
				Action: func(c *cli.Context) error {
					return runConfigMigrate(f, c.String("config"), c.Bool("dry-run"))
				},
			},
		},
	}
}

// runConfigShow prints, per catalogued key, the value loopd uses and its
// source — computed by loop.Settings.Resolve, the function loopd's
// assembly calls (relative paths against this working directory, as loopd
// resolves them against its own).
func runConfigShow(f *Factory, cfg loop.CLIConfig, format string, out output) error {
	wd, err := f.Getwd()
	if err != nil {
		return failWith(exitRefused, "loopctl config show: %v", err)
	}
	st, err := loop.ResolveSettings(cfg, loop.SettingsEnv{Getenv: f.Getenv, HomeDir: f.HomeDir, WorkDir: wd})
	if err != nil {
		return failWith(exitRefused, "loopctl config show: %v", err)
	}
	rows := st.Shown()
	// Secrets come from the environment only: say whether they are set,
	// never what they are.
	for _, name := range []string{st.Webhook.SecretEnv, st.Service.TokenEnv} {
		state := "(unset)"
		if f.Getenv(name) != "" {
			state = "(set)"
		}
		rows = append(rows, loop.ShownSetting{Key: "$" + name, Value: state, Source: loop.SourceEnv})
	}
	if format == "json" {
		return out.write(f.IO.Out, rows)
	}
	tw := newTable(f.IO.Out, f.colour(f.IO.Out))
	tw.head("KEY\tVALUE\tSOURCE")
	for _, r := range rows {
		tw.row("%s\t%s\t%s\n", r.Key, loop.ShowValue(r.Value), r.Source)
	}
	return tw.flush()
}

// runConfigHarness prints the harness-config report: the keys read with
// their values (stdout), and every warning (stderr, "warning: ..."), so a
// script reading the table is not disturbed by them.
func runConfigHarness(f *Factory, rep loop.HarnessReport, format string, out output) error {
	for _, w := range rep.Warnings {
		fmt.Fprintln(f.IO.ErrOut, "warning:", w)
	}
	for _, u := range rep.Unread {
		fmt.Fprintln(f.IO.ErrOut, "warning:", u.Warning(rep.File))
	}
	if format == "json" {
		return out.write(f.IO.Out, rep)
	}
	if !rep.Present {
		fmt.Fprintf(f.IO.Out, "no %s: theloop uses its defaults (loopctl config harness shows what a file would change)\n", rep.File)
		return nil
	}
	tw := newTable(f.IO.Out, f.colour(f.IO.Out))
	tw.head("KEY (READ)\tVALUE")
	for _, k := range slices.Sorted(maps.Keys(rep.Read)) {
		tw.row("%s\t%s\n", k, loop.ShowValue(rep.Read[k]))
	}
	if err := tw.flush(); err != nil {
		return err
	}
	if len(rep.Unread) > 0 {
		fmt.Fprintf(f.IO.Out, "%d keys of %s are not read by theloop (warnings above)\n", len(rep.Unread), rep.File)
	}
	return nil
}

func runConfigMigrate(f *Factory, path string, dryRun bool) error {
	if path == "" {
		wd, err := f.Getwd()
		if err != nil {
			return err
		}
		path, _ = loop.ResolveCLIConfigPath(loop.CLIConfigSource{
			LookupEnv: f.lookupEnv,
			HomeDir:   f.HomeDir, WorkDir: wd,
		})
		if path == "" {
			return failWith(exitRefused, "loopctl config migrate: no CLI config found; name it with --config")
		}
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return failWith(exitRefused, "loopctl config migrate: %v", err)
	}
	m, err := loop.MigrateCLIConfig(path, data)
	if err != nil {
		return failWith(exitRefused, "loopctl config migrate: %v", err)
	}
	w := f.IO.Out
	if !m.Changed() {
		fmt.Fprintf(w, "%s is current (version %s); nothing to do\n", path, loop.CurrentCLIConfigVersion)
		return nil
	}
	for _, c := range m.Changes {
		fmt.Fprintln(w, "  "+c.String())
	}
	if !m.CommentsKept {
		fmt.Fprintln(w, "  note: the file is re-encoded and its comments are not kept")
	}
	if dryRun {
		fmt.Fprintf(w, "dry run: %s was not written; it would read:\n%s", path, m.Output)
		return nil
	}
	perm := os.FileMode(0o600)
	if fi, err := os.Stat(path); err == nil {
		perm = fi.Mode().Perm()
	}
	// The original first, byte for byte: a migration the operator does not
	// like is undone with one mv.
	backup := path + ".bak"
	if err := atomicfile.Write(backup, data, perm); err != nil {
		return failWith(exitRefused, "loopctl config migrate: could not keep the original as %s (%v); %s was not changed", backup, err, path)
	}
	if err := atomicfile.Write(path, m.Output, perm); err != nil {
		return fmt.Errorf("loopctl config migrate: write %s: %w (the original is in %s)", path, err, backup)
	}
	fmt.Fprintf(w, "migrated %s to version %s; the original is in %s\n", path, loop.CurrentCLIConfigVersion, backup)
	return nil
}
