package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/internal/agentcli"
	"github.com/theloop-dev/theloop/plugin"
	"github.com/theloop-dev/theloop/plugin/install"
	"github.com/theloop-dev/theloop/sessions"
)

// The gate in the real agent CLIs. Each test runs the CLI npm ships
// (@anthropic-ai/claude-code, @openai/codex, @google/gemini-cli; .ci/run
// installs them into its tools cache) non-interactively, in a repository
// whose work item is blocked, with the hook exactly as `loopctl install
// --scope project` writes it, against a stand-in model server on 127.0.0.1
// that speaks the API's own streaming wire format and answers every turn
// "Done." It asserts what only the real client can show:
//
//   - the gate's reason reaches the model as the next turn;
//   - the CLI stops once the node is met;
//   - it gives up after the attempts (3), the CLI then stopping;
//   - a corrupt graph-state.json never makes it loop.
//
// A CLI that is not installed is skipped, saying so.

// realCLI finds an agent CLI: on PATH, else in .ci/run's tools cache.
func realCLI(t *testing.T, name, cacheDir string) string { return agentcli.Find(t, name, cacheDir) }

// modelTurn is one request the stand-in answered as a turn of the agent's
// conversation.
type modelTurn struct{ body string }

// standIn is a model API on 127.0.0.1. answer writes one turn's reply in
// the API's wire format; onTurn runs (under the lock) before each reply.
type standIn struct {
	t      *testing.T
	srv    *http.Server
	url    string
	mu     sync.Mutex
	turns  []modelTurn
	onTurn func(n int)
	// isTurn tells a conversation turn from the CLI's side requests
	// (titles, token counts, quota probes).
	isTurn func(path string, body []byte) bool
	answer func(w http.ResponseWriter, r *http.Request, body []byte)
}

func startStandIn(t *testing.T, s *standIn) *standIn {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s.t = t
	s.url = "http://" + ln.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if s.isTurn(r.URL.Path, body) {
			s.mu.Lock()
			s.turns = append(s.turns, modelTurn{body: string(body)})
			n := len(s.turns)
			if s.onTurn != nil {
				s.onTurn(n)
			}
			s.mu.Unlock()
		}
		s.answer(w, r, body)
	})}
	go func() { _ = s.srv.Serve(ln) }()
	t.Cleanup(func() { _ = s.srv.Close() })
	return s
}

func (s *standIn) Turns() []modelTurn {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]modelTurn(nil), s.turns...)
}

// sse writes one server-sent event.
func sse(w io.Writer, event string, data any) { agentcli.SSE(w, event, data) }

// gateScenario is one run of a CLI against a work item.
type gateScenario struct {
	name string
	// stage the item starts at, and what the stand-in does at each turn.
	start  stage
	onTurn func(t *testing.T, root string, n int)
	// wantTurns is how many conversation turns the CLI makes before it stops.
	wantTurns int
	corrupt   bool
	// crash runs the hook under an address-space limit so small that the
	// Go runtime dies before main (exit 2, crashingGate): the installed
	// command line answers exit 1, and the CLI stops after its one turn.
	crash bool
}

var gateScenarios = []gateScenario{
	{name: "the reason is the next turn, and the CLI stops once the node is met", start: atDesignBlock, wantTurns: 2,
		onTurn: func(t *testing.T, root string, n int) {
			if n == 2 { // the agent "fixes" design.md and writes the testing plan
				setStage(t, root, atDesignApprovalWait)
			}
		}},
	{name: "it gives up after 3 attempts", start: atDesignBlock, wantTurns: 4},
	{name: "a corrupt graph-state.json never loops", start: atDesignBlock, wantTurns: 4, corrupt: true},
	{name: "the runtime dying before main is no block", start: atDesignBlock, wantTurns: 1, crash: true},
}

// scenarioEnv is what a scenario adds to the CLI's environment: for a
// crash, a crashing loop-gate first on PATH (the last PATH= wins).
func scenarioEnv(t *testing.T, sc gateScenario) []string {
	if !sc.crash {
		return nil
	}
	crash := crashingGate(t)
	t.Cleanup(func() {
		if _, err := os.Stat(crash + ".ran"); err != nil {
			t.Errorf("the CLI never ran the crashing hook: %v", err)
		}
	})
	return []string{"PATH=" + filepath.Dir(crash) + string(os.PathListSeparator) + filepath.Dir(gateBinary) + string(os.PathListSeparator) + os.Getenv("PATH")}
}

// installedLine is the hook's command as loopctl install writes it into a
// JSON file.
func installedLine(harness string) string {
	return `"command": "loop-gate ` + harness + strings.ReplaceAll(plugin.CrashGuard, `"`, `\"`) + `"`
}

// projectRepo is the fixture repository with the gate installed at project
// scope by the same code `loopctl install` runs.
func projectRepo(t *testing.T, harness string, s stage, home string) string {
	t.Helper()
	root := writeRepo(t, s)
	var out, errOut bytes.Buffer
	opts := &install.Options{IO: install.IOStreams{Out: &out, ErrOut: &errOut},
		Env: &install.Env{Getenv: func(k string) string {
			if k == "PATH" {
				return filepath.Dir(gateBinary)
			}
			return ""
		}, Getwd: func() (string, error) { return root, nil }, HomeDir: func() (string, error) { return home, nil }},
		Harness: harness, Scope: "project", Command: "loop-gate"}
	require.NoError(t, opts.CheckFlags("install", true))
	require.NoError(t, install.Install(opts), errOut.String())
	return root
}

// runCLI runs cmd with a deadline a looping CLI would hit.
func runCLI(t *testing.T, cmd *exec.Cmd) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, cmd.Path, cmd.Args[1:]...)
	c.Dir, c.Env, c.Stdin = cmd.Dir, cmd.Env, cmd.Stdin
	out, err := c.CombinedOutput()
	require.NoError(t, ctx.Err(), "the CLI did not stop within 3 minutes: it loops\n%s", out)
	_ = err // a CLI's own exit code is not the gate's business; the turns are
	return string(out)
}

// checkTurns asserts the conversation a scenario should produce.
func checkTurns(t *testing.T, sc gateScenario, turns []modelTurn, out string) {
	t.Helper()
	if sc.corrupt {
		// Recomputed from the artifacts, or let go as an internal error:
		// either way at most the attempts, and the CLI stops.
		require.NotEmpty(t, turns)
		require.LessOrEqual(t, len(turns), sc.wantTurns, "a corrupt state made the CLI loop (its output:\n%s)", out)
	} else {
		require.Equal(t, sc.wantTurns, len(turns), "turns the CLI made (its output:\n%s)", out)
	}
	for i := 1; i < len(turns); i++ {
		body := turns[i].body
		require.True(t, strings.Contains(body, "loopctl graph complete "+fixtureItem), "turn %d carries the gate's reason", i+1)
		require.True(t, strings.Contains(body, fmt.Sprintf("(attempt %d/3)", i)), "turn %d is attempt %d", i+1, i)
		require.True(t, strings.Contains(body, "`design`"), "the reason names the node")
	}
}

// gateEnv is what every CLI run gets beside its own variables: the built
// loop-gate first on PATH, a private home, the work item.
func gateEnv(home string) []string {
	return []string{
		"PATH=" + filepath.Dir(gateBinary) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + home,
		"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"),
		"THE_LOOP_STATE_ROOT=" + filepath.Join(home, "state"),
		"THE_LOOP_WORK_ITEM=" + fixtureItem,
		"TMPDIR=" + os.TempDir(),
		"LANG=C.UTF-8",
	}
}

func corruptState(t *testing.T, root string) {
	t.Helper()
	writeFile(t, filepath.Join(root, "docs", "specs", fixtureItem, "graph-state.json"), "{\"version\": 1, \"currentNode\": \x00 not json")
}

// --- Claude Code ---------------------------------------------------------------

// anthropicStandIn speaks the Messages API (POST /v1/messages, streaming
// SSE or not): every turn is answered "Done." and end_turn.
func anthropicStandIn(t *testing.T, onTurn func(n int)) *standIn {
	return startStandIn(t, &standIn{onTurn: onTurn,
		isTurn: func(path string, body []byte) bool {
			return strings.HasSuffix(path, "/v1/messages") && bytes.Contains(body, []byte("WORK-ON-THE-ITEM"))
		},
		answer: func(w http.ResponseWriter, r *http.Request, body []byte) {
			if !strings.HasSuffix(r.URL.Path, "/v1/messages") {
				if strings.HasSuffix(r.URL.Path, "/count_tokens") {
					_ = json.NewEncoder(w).Encode(map[string]any{"input_tokens": 10})
					return
				}
				http.NotFound(w, r)
				return
			}
			var req struct {
				Model  string `json:"model"`
				Stream bool   `json:"stream"`
			}
			_ = json.Unmarshal(body, &req)
			msg := map[string]any{"id": "msg_standin", "type": "message", "role": "assistant", "model": req.Model,
				"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
				"usage": map[string]any{"input_tokens": 10, "output_tokens": 1}}
			if !req.Stream {
				msg["content"] = []any{map[string]any{"type": "text", "text": "Done."}}
				msg["stop_reason"] = "end_turn"
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(msg)
				return
			}
			w.Header().Set("Content-Type", "text/event-stream")
			w.Header().Set("Cache-Control", "no-cache")
			sse(w, "message_start", map[string]any{"type": "message_start", "message": msg})
			sse(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
			sse(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "Done."}})
			sse(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
			sse(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 2}})
			sse(w, "message_stop", map[string]any{"type": "message_stop"})
		}})
}

// Claude Code ends a turn itself after 9 consecutive Stop-hook blocks
// (CLAUDE_CODE_STOP_HOOK_BLOCK_CAP raises it): with the gate's attempts
// raised past that, the CLI still stops, after 1 + 8 continued turns.
func TestRealClaudeCodeCapsStopHookBlocks(t *testing.T) {
	claude := realCLI(t, "claude", "claude-code")
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	home := t.TempDir()
	root := projectRepo(t, "claude", atDesignBlock, home)
	srv := anthropicStandIn(t, nil)
	cmd := exec.Command(claude, "-p", "WORK-ON-THE-ITEM: finish the current node of "+fixtureItem+".", "--output-format", "text", "--model", "claude-sonnet-4-5")
	cmd.Dir = root
	cmd.Env = append(gateEnv(home), "THE_LOOP_GATE_MAX_ATTEMPTS=50",
		"ANTHROPIC_BASE_URL="+srv.url, "ANTHROPIC_API_KEY=sk-ant-standin",
		"CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"), "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1")
	out := runCLI(t, cmd)
	require.Equal(t, 9, len(srv.Turns()), "Claude Code's own cap on consecutive Stop-hook blocks (output:\n%s)", out)
}

func TestGateInRealClaudeCode(t *testing.T) {
	claude := realCLI(t, "claude", "claude-code")
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, sc := range gateScenarios {
		t.Run(sc.name, func(t *testing.T) {
			home := t.TempDir()
			root := projectRepo(t, "claude", sc.start, home)
			b, err := os.ReadFile(filepath.Join(root, ".claude", "settings.json"))
			require.NoError(t, err)
			require.Contains(t, string(b), installedLine("claude"), "the hook as loopctl install writes it")
			if sc.corrupt {
				corruptState(t, root)
			}
			srv := anthropicStandIn(t, func(n int) {
				if sc.onTurn != nil {
					sc.onTurn(t, root, n)
				}
			})
			cmd := exec.Command(claude, "-p", "WORK-ON-THE-ITEM: finish the current node of "+fixtureItem+".", "--output-format", "text", "--model", "claude-sonnet-4-5")
			cmd.Dir = root
			cmd.Env = append(append(gateEnv(home), scenarioEnv(t, sc)...),
				"ANTHROPIC_BASE_URL="+srv.url,
				"ANTHROPIC_API_KEY=sk-ant-standin",
				"CLAUDE_CONFIG_DIR="+filepath.Join(home, ".claude"),
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
				"DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1",
			)
			out := runCLI(t, cmd)
			checkTurns(t, sc, srv.Turns(), out)
		})
	}
}

// --- Gemini CLI ----------------------------------------------------------------

// geminiStandIn speaks the Gemini API (generateContent and
// streamGenerateContent?alt=sse): every conversation turn is answered
// "Done." with finishReason STOP; the CLI's side calls (its model router,
// its next-speaker and loop checks) get a JSON answer they accept.
func geminiStandIn(t *testing.T, onTurn func(n int)) *standIn {
	return startStandIn(t, &standIn{onTurn: onTurn,
		isTurn: func(path string, body []byte) bool {
			return strings.Contains(path, ":streamGenerateContent") && bytes.Contains(body, []byte("WORK-ON-THE-ITEM"))
		},
		answer: func(w http.ResponseWriter, r *http.Request, body []byte) {
			usage := map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 2, "totalTokenCount": 12}
			switch {
			case strings.Contains(r.URL.Path, ":countTokens"):
				_ = json.NewEncoder(w).Encode(map[string]any{"totalTokens": 10})
			case strings.Contains(r.URL.Path, ":streamGenerateContent"):
				w.Header().Set("Content-Type", "text/event-stream")
				sse(w, "", map[string]any{"candidates": []any{map[string]any{"index": 0,
					"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Done."}}}, "finishReason": "STOP"}},
					"usageMetadata": usage, "modelVersion": "gemini-2.5-pro"})
			case strings.Contains(r.URL.Path, ":generateContent"):
				// Side calls ask for JSON: a router's choice, a next-speaker
				// verdict ("user": the turn is over).
				text := `{"reasoning": "stand-in", "model_choice": "flash", "next_speaker": "user"}`
				w.Header().Set("Content-Type", "application/json")
				_ = json.NewEncoder(w).Encode(map[string]any{"candidates": []any{map[string]any{"index": 0,
					"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "finishReason": "STOP"}},
					"usageMetadata": usage})
			default:
				http.NotFound(w, r)
			}
		}})
}

// runGemini runs `gemini -p` in root against the stand-in; trusted marks
// root trusted in the CLI's trusted-folders file first, as loopd does for
// its sessions.
func runGemini(t *testing.T, gemini, root, home string, srv *standIn, env []string, extra ...string) string {
	t.Helper()
	// The API key as the auth method, and nothing else of the user's.
	writeFile(t, filepath.Join(home, ".gemini", "settings.json"), `{"security": {"auth": {"selectedType": "gemini-api-key"}}, "general": {"disableAutoUpdate": true}, "privacy": {"usageStatisticsEnabled": false}}`)
	args := append([]string{"-p", "WORK-ON-THE-ITEM: finish the current node of " + fixtureItem + ".", "-m", "gemini-2.5-pro"}, extra...)
	cmd := exec.Command(gemini, args...)
	cmd.Dir = root
	cmd.Env = append(append(gateEnv(home), env...),
		"GOOGLE_GEMINI_BASE_URL="+srv.url,
		"GEMINI_API_KEY=standin-key",
		"GEMINI_CLI_NO_RELAUNCH=true",
		"GEMINI_TELEMETRY_ENABLED=false",
		"NO_COLOR=1",
	)
	return runCLI(t, cmd)
}

func TestGateInRealGeminiCLI(t *testing.T) {
	gemini := realCLI(t, "gemini", "gemini-cli")
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, sc := range gateScenarios {
		t.Run(sc.name, func(t *testing.T) {
			home := t.TempDir()
			root := projectRepo(t, "gemini", sc.start, home)
			b, err := os.ReadFile(filepath.Join(root, ".gemini", "settings.json"))
			require.NoError(t, err)
			require.Contains(t, string(b), installedLine("gemini"), "the hook as loopctl install writes it")
			if sc.corrupt {
				corruptState(t, root)
			}
			srv := geminiStandIn(t, func(n int) {
				if sc.onTurn != nil {
					sc.onTurn(t, root, n)
				}
			})
			// As loopd prepares a Gemini session: the checkout trusted in the
			// CLI's own trusted-folders file.
			g := &sessions.Gemini{TrustedFolders: sessions.GeminiTrustedFoldersFile(func(string) string { return "" }, home)}
			_, err = g.PrepareEnvironment(root)
			require.NoError(t, err)
			out := runGemini(t, gemini, root, home, srv, scenarioEnv(t, sc), "--skip-trust") // as loopd starts it
			checkTurns(t, sc, srv.Turns(), out)
		})
	}
	// What loopd no longer relies on: --skip-trust alone trusts the folder
	// too late for its settings, so the project's gate never runs.
	t.Run("under --skip-trust alone the project's hook does not load", func(t *testing.T) {
		home := t.TempDir()
		root := projectRepo(t, "gemini", atDesignBlock, home)
		srv := geminiStandIn(t, nil)
		out := runGemini(t, gemini, root, home, srv, nil, "--skip-trust")
		require.Len(t, srv.Turns(), 1, "no gate ran (output:\n%s)", out)
	})
}

// --- Codex CLI -------------------------------------------------------------------

// responsesStandIn speaks OpenAI's Responses API (POST /v1/responses,
// streaming SSE), which Codex's model providers use: every turn is one
// assistant message "Done.".
func responsesStandIn(t *testing.T, onTurn func(n int)) *standIn {
	return startStandIn(t, &standIn{onTurn: onTurn,
		isTurn: func(path string, body []byte) bool {
			return strings.HasSuffix(path, "/responses") && bytes.Contains(body, []byte("WORK-ON-THE-ITEM"))
		},
		answer: func(w http.ResponseWriter, r *http.Request, body []byte) {
			if !strings.HasSuffix(r.URL.Path, "/responses") {
				if strings.HasSuffix(r.URL.Path, "/models") {
					_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{}, "models": []any{}})
					return
				}
				http.NotFound(w, r)
				return
			}
			item := map[string]any{"id": "msg_standin", "type": "message", "role": "assistant", "status": "completed",
				"content": []any{map[string]any{"type": "output_text", "text": "Done.", "annotations": []any{}}}}
			resp := map[string]any{"id": "resp_standin", "object": "response", "status": "in_progress", "output": []any{}}
			w.Header().Set("Content-Type", "text/event-stream")
			sse(w, "response.created", map[string]any{"type": "response.created", "response": resp})
			sse(w, "response.output_item.added", map[string]any{"type": "response.output_item.added", "output_index": 0,
				"item": map[string]any{"id": "msg_standin", "type": "message", "role": "assistant", "status": "in_progress", "content": []any{}}})
			sse(w, "response.output_text.delta", map[string]any{"type": "response.output_text.delta", "item_id": "msg_standin", "output_index": 0, "content_index": 0, "delta": "Done."})
			sse(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
			done := map[string]any{"id": "resp_standin", "object": "response", "status": "completed", "output": []any{item},
				"usage": map[string]any{"input_tokens": 10, "output_tokens": 2, "total_tokens": 12,
					"input_tokens_details": map[string]any{"cached_tokens": 0}, "output_tokens_details": map[string]any{"reasoning_tokens": 0}}}
			sse(w, "response.completed", map[string]any{"type": "response.completed", "response": done})
		}})
}

// runCodex runs `codex exec` in root against the stand-in, as the model
// provider a config.toml in CODEX_HOME names; trusted marks root a trusted
// project there (what `codex --trust` or the trust dialog writes).
func runCodex(t *testing.T, codex, root, home string, srv *standIn, trusted bool, env []string, extra ...string) string {
	t.Helper()
	codexHome := filepath.Join(home, ".codex")
	cfg := `model = "gpt-5-codex"
model_provider = "standin"
[model_providers.standin]
name = "stand-in"
base_url = "` + srv.url + `/v1"
wire_api = "responses"
env_key = "STANDIN_API_KEY"
`
	if trusted {
		cfg += "[projects." + strconvQuote(root) + "]\ntrust_level = \"trusted\"\n"
	}
	writeFile(t, filepath.Join(codexHome, "config.toml"), cfg)
	args := append([]string{"exec"}, extra...)
	args = append(args, "--skip-git-repo-check", "WORK-ON-THE-ITEM: finish the current node of "+fixtureItem+".")
	cmd := exec.Command(codex, args...)
	cmd.Dir = root
	cmd.Env = append(append(gateEnv(home), env...), "CODEX_HOME="+codexHome, "STANDIN_API_KEY=standin", "NO_COLOR=1")
	cmd.Stdin = strings.NewReader("")
	return runCLI(t, cmd)
}

func strconvQuote(s string) string { b, _ := json.Marshal(s); return string(b) }

func TestGateInRealCodexCLI(t *testing.T) {
	codex := realCLI(t, "codex", "codex-cli")
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	for _, sc := range gateScenarios {
		t.Run(sc.name, func(t *testing.T) {
			home := t.TempDir()
			root := projectRepo(t, "codex", sc.start, home)
			b, err := os.ReadFile(filepath.Join(root, ".codex", "hooks.json"))
			require.NoError(t, err)
			require.Contains(t, string(b), installedLine("codex"), "the hook as loopctl install writes it")
			if sc.corrupt {
				corruptState(t, root)
			}
			srv := responsesStandIn(t, func(n int) {
				if sc.onTurn != nil {
					sc.onTurn(t, root, n)
				}
			})
			// As loopd starts its Codex sessions (sessions.Codex).
			out := runCodex(t, codex, root, home, srv, true, scenarioEnv(t, sc), "--enable", "hooks", "--dangerously-bypass-hook-trust")
			checkTurns(t, sc, srv.Turns(), out)
		})
	}
	t.Run("a plain codex exec after install runs no gate", func(t *testing.T) {
		home := t.TempDir()
		root := projectRepo(t, "codex", atDesignBlock, home)
		srv := responsesStandIn(t, nil)
		out := runCodex(t, codex, root, home, srv, true, nil)
		require.Len(t, srv.Turns(), 1, "no gate ran (output:\n%s)", out)
		// Not for want of the hooks feature: an untrusted hook is skipped.
		srv = responsesStandIn(t, nil)
		out = runCodex(t, codex, root, home, srv, true, nil, "--enable", "hooks")
		require.Len(t, srv.Turns(), 1, "no gate ran with hooks on but the hook untrusted (output:\n%s)", out)
	})
	t.Run("an untrusted project's hooks do not load", func(t *testing.T) {
		home := t.TempDir()
		root := projectRepo(t, "codex", atDesignBlock, home)
		srv := responsesStandIn(t, nil)
		out := runCodex(t, codex, root, home, srv, false, nil, "--enable", "hooks", "--dangerously-bypass-hook-trust")
		require.Len(t, srv.Turns(), 1, "no gate ran (output:\n%s)", out)
	})
}
