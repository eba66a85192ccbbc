// Package required decides whether a test may skip for want of an outside
// tool (an agent CLI, GitHub's published descriptions) or must fail.
//
// A test that needs a real client skips, saying how to get it, on a
// machine without one. In CI that skip would hide the test: .ci/run
// installs the tools it can and names them in THELOOP_REQUIRE (a comma-
// separated list: claude, codex, gemini, octokit-openapi,
// octokit-webhooks), and a test that would skip for one of those fails
// instead. It is test support: no production code imports it.
package required

import (
	"os"
	"slices"
	"strings"
	"testing"
)

// Env names the tools that must be there.
const Env = "THELOOP_REQUIRE"

// Tool reports whether THELOOP_REQUIRE names tool.
func Tool(tool string) bool {
	return slices.Contains(strings.Split(os.Getenv(Env), ","), tool)
}

// Skip skips t for want of tool, with why; where THELOOP_REQUIRE names the
// tool it fails t instead.
func Skip(t testing.TB, tool, why string) {
	t.Helper()
	if Tool(tool) {
		t.Fatalf("%s — but %s=%q says it was installed, so this test must run, not skip", why, Env, os.Getenv(Env))
	}
	t.Skip(why)
}
