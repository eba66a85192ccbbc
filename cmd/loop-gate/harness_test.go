package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// Payloads as the Codex CLI (Stop, from hooks.json) and the Gemini CLI
// (AfterAgent, from settings.json) send them.

func codexPayload(cwd string) []byte {
	return fmt.Appendf(nil, `{"session_id":"019a8f5e-7c1d-7a42-9b1e-3f0c2d4e5a61","turn_id":"1","transcript_path":null,"cwd":%q,"hook_event_name":"Stop","model":"gpt-5-codex","permission_mode":"default","stop_hook_active":false,"last_assistant_message":"Done."}`, cwd)
}

func geminiPayload(cwd string) []byte {
	return fmt.Appendf(nil, `{"session_id":"5d1c7a3e-8f2b-4c6d-9e0a-1b2c3d4e5f60","transcript_path":"/home/dev/.gemini/tmp/x/chats/session.json","cwd":%q,"hook_event_name":"AfterAgent","timestamp":"2026-12-01T19:00:00.000Z","prompt":"work on it","prompt_response":"Done.","stop_hook_active":false}`, cwd)
}

// TestEachHarnessGetsItsAnswer: a blocking node answers in the harness's
// documented form on stdout with exit 0; a human gate and no work item
// answer exit 0 with nothing on stdout, which every harness reads as
// "stop"; a fatal error in the check (the process ends with SIGABRT) is
// never exit 2, which Codex reads as a block, and reaches Gemini — which
// reads any code but 0 and 1 with text as a block — without any text.
func TestEachHarnessGetsItsAnswer(t *testing.T) {
	for _, tc := range []struct {
		harness  string
		payload  func(root string) []byte
		decision string
	}{
		{"codex", codexPayload, "block"},
		{"gemini", geminiPayload, "deny"},
	} {
		t.Run(tc.harness+": block", func(t *testing.T) {
			root := writeRepo(t, atDesignBlock)
			g := newGate(t)
			g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
			r := g.run(tc.payload(root), tc.harness)
			require.Equal(t, 0, r.code, r.stderr)
			var a struct {
				Decision string `json:"decision"`
				Reason   string `json:"reason"`
			}
			decodeStrict(t, r.stdout, &a)
			require.Equal(t, tc.decision, a.Decision)
			require.True(t, strings.HasPrefix(a.Reason, "theloop: issue-42 is at node `design`, which is not done:\n"), a.Reason)
			require.Contains(t, a.Reason, "(attempt 1/3)")
		})
		t.Run(tc.harness+": a human gate lets it stop", func(t *testing.T) {
			root := writeRepo(t, atDesignApprovalWait)
			g := newGate(t)
			g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
			r := g.run(tc.payload(root), tc.harness)
			requireAllowed(t, r)
			require.Empty(t, r.stderr)
		})
		t.Run(tc.harness+": no work item lets it stop", func(t *testing.T) {
			root := writeRepo(t, atDesignBlock)
			g := newGate(t)
			r := g.run(tc.payload(root), tc.harness)
			requireAllowed(t, r)
			require.Empty(t, r.stderr)
		})
		t.Run(tc.harness+": a fatal error fails open", func(t *testing.T) {
			root := exhaustingRepo(t)
			g := newGate(t)
			g.env["THE_LOOP_WORK_ITEM"] = fixtureItem
			g.env["THE_LOOP_GATE_MEMORY_LIMIT_MB"] = "5"
			r := g.run(tc.payload(root), tc.harness)
			require.NotEqual(t, 2, r.code, "exit 2 is a block to both: %s", r.stderr)
			require.Empty(t, r.stdout, "no decision on stdout")
			if tc.harness == "gemini" && r.code != 0 && r.code != 1 {
				// Gemini reads any other code *with text* as a block.
				require.Empty(t, r.stderr, "the runtime's crash text must not reach Gemini (exit %d)", r.code)
			}
		})
		t.Run(tc.harness+": bad usage is exit 1, a non-blocking error", func(t *testing.T) {
			g := newGate(t)
			r := g.run(nil, tc.harness, "extra")
			require.Equal(t, 1, r.code)
			require.Empty(t, r.stdout)
		})
	}
}

// exhaustingRepo is a blocking work item whose check needs far more memory
// than a 5 MiB address-space cap allows (see TestFatalErrorIsNotExitTwo).
func exhaustingRepo(t *testing.T) string {
	t.Helper()
	root := writeRepo(t, atDesignBlock)
	p := filepath.Join(root, ".the-loop", "harness-config.yaml")
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte("x: \""+strings.Repeat("a", 900_000)+"\"\n"), 0o644))
	design := filepath.Join(root, "docs", "specs", fixtureItem, "design.md")
	old, err := os.ReadFile(design)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(design, append(old, []byte(strings.Repeat("- a\n", (15<<20)/4))...), 0o644))
	return root
}
