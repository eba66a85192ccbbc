package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/loop"
)

func TestScenariosVerb(t *testing.T) {
	repo := newRepo(t)
	write(t, repo, ".the-loop/harness-config.yaml", "ticketing:\n  github: {owner: acme, repo: widgets}\ntesting:\n  integrationTestGlobs: [\"tests/**/*_test.go\"]\n")
	write(t, repo, "tests/reset/reset_test.go", "package reset\n\n// Scenario: An operator resets a stuck session\n//   Given a session that lost its way\n//   When the operator resets it\n//   Then a fresh conversation reads the artifacts\n")
	write(t, repo, "features/cart.feature", "Feature: Cart\n  Scenario: Adding\n    Given an empty cart\n")
	f, io := testFactory(t, repo, nil)
	run := func(args ...string) int {
		io.out.Reset()
		io.err.Reset()
		return Main(append([]string{"loopctl"}, args...), f)
	}

	require.Equal(t, exitOK, run("scenarios"), io.err.String())
	require.Contains(t, io.out.String(), "tests/reset/reset_test.go:3")
	require.Contains(t, io.out.String(), "An operator resets a stuck session")
	require.NotContains(t, io.out.String(), "Adding", "the configured globs, not the default")

	require.Equal(t, exitOK, run("scenarios", "--format", "json", "--glob", "**/*.feature", "--glob", "tests/**/*.go"), io.err.String())
	var scan loop.ScenarioScan
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &scan))
	require.Equal(t, "flag", scan.Source)
	require.Equal(t, 2, scan.Files)
	require.Len(t, scan.Scenarios, 2)
	require.Equal(t, "Cart", scan.Scenarios[0].Feature)

	require.Equal(t, exitOK, run("scenarios", "--jq", ".scenarios[].title"), io.err.String())
	require.Equal(t, "An operator resets a stuck session\n", io.out.String())
	require.Equal(t, exitOK, run("scenarios", "--format", "markdown"), io.err.String())
	require.Contains(t, io.out.String(), "### Scenario: An operator resets a stuck session\n\nLine 3\n\n- Given a session that lost its way\n")

	require.Equal(t, exitRefused, run("scenarios", "--glob", "../*"), "a glob may not leave the repository")
	require.Contains(t, io.err.String(), "leaves the repository")
	require.Equal(t, exitRefused, run("scenarios", "--format", "yaml"))
}

func TestInstructionsVerb(t *testing.T) {
	repo := newRepo(t)
	f, io := testFactory(t, repo, nil)
	run := func(args ...string) int {
		io.out.Reset()
		io.err.Reset()
		return Main(append([]string{"loopctl"}, args...), f)
	}
	// None configured: not a failure, strict or not.
	require.Equal(t, exitOK, run("instructions", "--strict"), io.err.String())
	require.Contains(t, io.out.String(), "no instruction docs configured")

	write(t, repo, ".the-loop/harness-config.yaml", "ticketing:\n  github: {owner: acme, repo: widgets}\ncustomInstructions:\n  - docs/CONVENTIONS.md\n  - {path: ~/handbook.md, description: house rules}\n")
	write(t, repo, "docs/CONVENTIONS.md", "Never approve your own work. SECRET-CONTENT\n")
	require.Equal(t, exitOK, run("instructions"), io.err.String())
	require.Contains(t, io.out.String(), "docs/CONVENTIONS.md")
	require.Contains(t, io.out.String(), "not found", "the home doc is not there yet")
	require.Equal(t, exitFailed, run("instructions", "--strict"), "a doc that does not resolve fails CI when asked")
	require.Contains(t, io.err.String(), "1 of 2 instruction docs do not resolve")

	home, err := f.HomeDir()
	require.NoError(t, err)
	write(t, home, "handbook.md", "house rules SECRET-CONTENT\n")
	require.Equal(t, exitOK, run("instructions", "--strict", "--format", "json", "--doc", "docs/CONVENTIONS.md"), io.err.String())
	var in loop.Instructions
	require.NoError(t, json.Unmarshal(io.out.Bytes(), &in))
	require.Len(t, in.Docs, 3)
	require.Equal(t, "flag", in.Docs[2].Source)
	require.Zero(t, in.Missing())
	for _, format := range []string{"table", "json", "markdown"} {
		require.Equal(t, exitOK, run("instructions", "--format", format), io.err.String())
		require.False(t, strings.Contains(io.out.String(), "SECRET-CONTENT"), "a doc's contents never ride out in the %s report", format)
	}
	require.Equal(t, exitOK, run("instructions", "--template", "{{range .docs}}{{.path}} {{.exists}}\n{{end}}"), io.err.String())
	require.Equal(t, "docs/CONVENTIONS.md true\n~/handbook.md true\n", io.out.String())
}
