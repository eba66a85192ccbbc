package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/theloop-dev/theloop/loop"
)

// The repository's read-only utilities the agent uses while it writes a
// testing plan or starts on a work item: scenarios (the Gherkin scenarios
// the tests carry) and instructions (the docs the repository asks every
// agent to read). They read files in-process, as check does: an agent's
// session has no way to the control socket, and nothing here needs loopd.

func repoUtilFlags() []cli.Flag {
	return append(repoFlagDefs(false),
		&cli.StringFlag{Name: "format", Value: "table", Usage: "table, markdown or json"},
		outputFlags()[0], outputFlags()[1])
}

// readUtilFormat reads --format (table, markdown, json) with --jq and
// --template.
func readUtilFormat(c *cli.Context, verb string) (string, output, error) {
	format := c.String("format")
	switch format {
	case "table", "markdown", "json":
	default:
		return "", output{}, failWith(exitRefused, "loopctl %s: --format must be table, markdown or json, not %q", verb, format)
	}
	o, err := readOutput(c, verb, &format)
	return format, o, err
}

func newScenariosCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:  "scenarios",
		Usage: "list the Gherkin scenarios the repository's tests carry",
		Description: `Reads the files matching --glob (repeatable), else the harness config's
testing.integrationTestGlobs, else **/*.feature, and lists every scenario:
.feature files, and "Scenario:" blocks with their Given/When/Then lines written
in test code's comments or docstrings. Globs are relative to the repository
root; ** matches any number of directories. Nothing is run.

   # .the-loop/harness-config.yaml
   testing:
     integrationTestGlobs: ["tests/**/*_integration_test.go", "features/**/*.feature"]

Examples:
   loopctl scenarios
   loopctl scenarios --glob 'tests/**/*_test.go' --format markdown
   loopctl scenarios --jq '.scenarios[].title'`,
		Flags: append(repoUtilFlags(), &cli.StringSliceFlag{Name: "glob", Usage: "a glob of files to read (repeatable; replaces testing.integrationTestGlobs)"}),
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "scenarios", ""); err != nil {
				return err
			}
			format, o, err := readUtilFormat(c, "scenarios")
			if err != nil {
				return err
			}
			repo, err := f.openRepo(readRepoFlags(c), "", "")
			if err != nil {
				return err
			}
			globs, source, warns := loop.ScenarioGlobs(repo.Harness, c.StringSlice("glob"))
			scan, err := loop.FindScenarios(repo.Root, globs)
			if err != nil {
				return failWith(exitRefused, "loopctl scenarios: %v", err)
			}
			scan.Source = source
			scan.Warnings = append(warns, scan.Warnings...)
			for _, w := range scan.Warnings {
				fmt.Fprintln(f.IO.ErrOut, "warning:", w)
			}
			return printScenarios(f, format, o, scan)
		},
	}
}

func printScenarios(f *Factory, format string, o output, scan loop.ScenarioScan) error {
	w := f.IO.Out
	switch format {
	case "json":
		return o.write(w, scan)
	case "markdown":
		fmt.Fprintf(w, "# Scenarios (%d in %d files matching %s)\n", len(scan.Scenarios), scan.Files, strings.Join(scan.Globs, ", "))
		file := ""
		for _, s := range scan.Scenarios {
			if s.File != file {
				file = s.File
				fmt.Fprintf(w, "\n## %s\n", file)
			}
			fmt.Fprintf(w, "\n### %s: %s\n\n", s.Keyword, s.Title)
			if s.Feature != "" {
				fmt.Fprintf(w, "Feature: %s (line %d)\n\n", s.Feature, s.Line)
			} else {
				fmt.Fprintf(w, "Line %d\n\n", s.Line)
			}
			for _, st := range s.Steps {
				fmt.Fprintf(w, "- %s\n", st)
			}
		}
		return nil
	}
	if len(scan.Scenarios) == 0 {
		fmt.Fprintf(w, "no scenarios in the %d files matching %s (%s)\n", scan.Files, strings.Join(scan.Globs, ", "), scan.Source)
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "FILE:LINE\tSCENARIO\tSTEPS")
	for _, s := range scan.Scenarios {
		fmt.Fprintf(tw, "%s:%d\t%s\t%d\n", s.File, s.Line, s.Title, len(s.Steps))
	}
	return tw.Flush()
}

func newInstructionsCmd(f *Factory) *cli.Command {
	return &cli.Command{
		Name:  "instructions",
		Usage: "list the instruction docs the repository asks every agent to read",
		Description: `Resolves the harness config's customInstructions (and --doc, repeatable): a
relative path against the repository root, ~/ against your home directory, an
absolute path as is (a company-wide doc outside the repository resolves too).
The report gives each doc's path, size and SHA-256, never its contents: read
the files themselves. No docs configured is not a failure; with --strict a doc
that does not resolve is (exit 1), for CI.

   # .the-loop/harness-config.yaml
   customInstructions:
     - docs/CONVENTIONS.md
     - {path: ~/company/handbook.md, description: house rules}

Examples:
   loopctl instructions
   loopctl instructions --strict --format json
   loopctl instructions --doc docs/ARCHITECTURE.md --format markdown`,
		Flags: append(repoUtilFlags(),
			&cli.StringSliceFlag{Name: "doc", Usage: "another instruction doc to resolve (repeatable)"},
			&cli.BoolFlag{Name: "strict", Usage: "exit 1 when a doc does not resolve"}),
		Action: func(c *cli.Context) error {
			if err := noArgs(c, "instructions", ""); err != nil {
				return err
			}
			format, o, err := readUtilFormat(c, "instructions")
			if err != nil {
				return err
			}
			repo, err := f.openRepo(readRepoFlags(c), "", "")
			if err != nil {
				return err
			}
			entries, warns := loop.InstructionEntries(repo.Harness)
			for _, d := range c.StringSlice("doc") {
				entries = append(entries, loop.InstructionEntry{Path: d, Source: "flag"})
			}
			home, _ := f.HomeDir()
			in := loop.ResolveInstructions(repo.Root, home, entries)
			in.Warnings = warns
			for _, w := range warns {
				fmt.Fprintln(f.IO.ErrOut, "warning:", w)
			}
			if err := printInstructions(f, format, o, in); err != nil {
				return err
			}
			if missing := in.Missing(); missing > 0 && c.Bool("strict") {
				return failWith(exitFailed, "loopctl instructions: %d of %d instruction docs do not resolve; fix customInstructions in %s or add the files", missing, len(in.Docs), loop.HarnessConfigFile)
			}
			return nil
		},
	}
}

func printInstructions(f *Factory, format string, o output, in loop.Instructions) error {
	w := f.IO.Out
	switch format {
	case "json":
		return o.write(w, in)
	case "markdown":
		fmt.Fprintln(w, "# Instruction docs")
		if len(in.Docs) == 0 {
			fmt.Fprintln(w, "\nThis repository names none (customInstructions in .the-loop/harness-config.yaml).")
			return nil
		}
		fmt.Fprintln(w, "\nRead these before you start; they are the repository's rules for agents.")
		fmt.Fprintln(w)
		for _, d := range in.Docs {
			line := "- `" + d.Resolved + "`"
			if d.Description != "" {
				line += " — " + d.Description
			}
			if !d.Exists {
				line += " (does not resolve: " + d.Problem + ")"
			}
			fmt.Fprintln(w, line)
		}
		return nil
	}
	if len(in.Docs) == 0 {
		fmt.Fprintln(w, "no instruction docs configured (customInstructions in .the-loop/harness-config.yaml)")
		return nil
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "DOC\tRESOLVED\tSTATE\tSOURCE")
	for _, d := range in.Docs {
		state := fmt.Sprintf("%d bytes", d.Bytes)
		if !d.Exists {
			state = d.Problem
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", d.Path, dashIfEmpty(d.Resolved), state, d.Source)
	}
	return tw.Flush()
}
