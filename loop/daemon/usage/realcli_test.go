package usage_test

import (
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
	"github.com/theloop-dev/theloop/loop/daemon/usage"
)

// The parsers against the real agent CLIs (.ci/run installs them into its
// tools cache): each CLI runs non-interactively against a stand-in model
// server on 127.0.0.1 that reports a distinct, known usage for every turn
// in its API's own usage fields; the conversation is then continued (a
// resume), so the record grows. The parser, reading the record the CLI
// wrote in its private home incrementally, must find exactly the tokens
// the server reported, by kind and model. A CLI not installed is skipped,
// saying so.

// modelServer is a stand-in model API; reply answers one request and
// returns the usage it reported for a conversation turn (zero for a side
// call).
type modelServer struct {
	url   string
	mu    sync.Mutex
	turns []usage.Tokens
	n     int
}

func serveModel(t *testing.T, reply func(w http.ResponseWriter, r *http.Request, body []byte, n int) (usage.Tokens, bool)) *modelServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &modelServer{url: "http://" + ln.Addr().String()}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		s.mu.Lock()
		n := s.n + 1
		tok, turn := reply(w, r, body, n)
		if turn {
			s.n = n
			s.turns = append(s.turns, tok)
		}
		s.mu.Unlock()
	})}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	return s
}

func (s *modelServer) reported() (usage.Tokens, int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var sum usage.Tokens
	for _, t := range s.turns {
		sum = sum.Add(t)
	}
	return sum, len(s.turns)
}

func runCLI(t *testing.T, dir string, env []string, bin string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c := exec.CommandContext(ctx, bin, args...)
	c.Dir, c.Env, c.Stdin = dir, env, strings.NewReader("")
	out, err := c.CombinedOutput()
	require.NoError(t, ctx.Err(), "%s did not finish in 3 minutes:\n%s", bin, out)
	require.NoError(t, err, "%s %v:\n%s", bin, args, out)
}

// readAll reads every record of the session incrementally, with tails
// kept from earlier calls, and returns what the new reads found.
func readAll(t *testing.T, harness, home, checkout, sid string, tails map[string]*usage.Tail) (usage.Tokens, int, map[string]bool) {
	t.Helper()
	dirs := usage.Dirs{Home: home}
	paths := usage.Locate(harness, dirs, checkout, sid)
	require.NotEmpty(t, paths, "the %s record in %s", harness, home)
	var sum usage.Tokens
	n := 0
	models := map[string]bool{}
	for _, p := range paths {
		tl := tails[p]
		if tl == nil {
			var err error
			tl, err = usage.NewTail(harness, dirs.Root(harness), p, usage.Position{})
			require.NoError(t, err)
			tails[p] = tl
		}
		turns, err := tl.Read()
		require.NoError(t, err)
		for _, tr := range turns {
			sum = sum.Add(tr.Tokens)
			models[tr.Model] = true
			n++
		}
	}
	return sum, n, models
}

// checkRuns runs the CLI twice (start, then continue) and checks the
// parser after each run against what the stand-in reported in between.
func checkRuns(t *testing.T, harness, home, dir, sid, model string, srv *modelServer, run func(first bool)) {
	tails := map[string]*usage.Tail{}
	var before usage.Tokens
	beforeN := 0
	for i, first := range []bool{true, false} {
		run(first)
		want, wantN := srv.reported()
		got, n, models := readAll(t, harness, home, dir, sid, tails)
		require.Equal(t, wantN-beforeN, n, "run %d: turns read (only the new ones)", i+1)
		require.Equal(t, subTokens(want, before), got, "run %d: the tokens the server reported, by kind", i+1)
		require.Equal(t, map[string]bool{model: true}, models)
		before, beforeN = want, wantN
	}
	require.Equal(t, 2, beforeN, "one conversation turn per run")
}

func subTokens(a, b usage.Tokens) usage.Tokens {
	return usage.Tokens{Input: a.Input - b.Input, Output: a.Output - b.Output, CacheWrite: a.CacheWrite - b.CacheWrite, CacheRead: a.CacheRead - b.CacheRead}
}

func TestRealClaudeCodeTranscript(t *testing.T) {
	claude := agentcli.Find(t, "claude", "claude-code")
	home, dir := t.TempDir(), t.TempDir()
	srv := serveModel(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) (usage.Tokens, bool) {
		if !strings.HasSuffix(r.URL.Path, "/v1/messages") {
			_ = json.NewEncoder(w).Encode(map[string]any{"input_tokens": 10})
			return usage.Tokens{}, false
		}
		var req struct {
			Model  string `json:"model"`
			Stream bool   `json:"stream"`
		}
		_ = json.Unmarshal(body, &req)
		tok := usage.Tokens{Input: int64(1000 + n), Output: int64(200 + n), CacheWrite: int64(300 + n), CacheRead: int64(4000 + n)}
		msg := map[string]any{"id": fmt.Sprintf("msg_standin_%d", n), "type": "message", "role": "assistant", "model": req.Model,
			"content": []any{}, "stop_reason": nil, "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": tok.Input, "output_tokens": 1, "cache_creation_input_tokens": tok.CacheWrite, "cache_read_input_tokens": tok.CacheRead}}
		if !req.Stream { // a side call: not a conversation turn
			msg["content"] = []any{map[string]any{"type": "text", "text": "Done."}}
			msg["stop_reason"] = "end_turn"
			_ = json.NewEncoder(w).Encode(msg)
			return usage.Tokens{}, false
		}
		w.Header().Set("Content-Type", "text/event-stream")
		agentcli.SSE(w, "message_start", map[string]any{"type": "message_start", "message": msg})
		agentcli.SSE(w, "content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": map[string]any{"type": "text", "text": ""}})
		agentcli.SSE(w, "content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": map[string]any{"type": "text_delta", "text": "Done."}})
		agentcli.SSE(w, "content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
		agentcli.SSE(w, "message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": "end_turn", "stop_sequence": nil}, "usage": map[string]any{"output_tokens": tok.Output}})
		agentcli.SSE(w, "message_stop", map[string]any{"type": "message_stop"})
		return tok, true
	})
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir(), "LANG=C.UTF-8",
		"ANTHROPIC_BASE_URL=" + srv.url, "ANTHROPIC_API_KEY=sk-ant-standin",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1", "DISABLE_ERROR_REPORTING=1"}
	const sid = "3f1c2b7e-0d4a-4c3e-9b1f-6a2d8e5c7b10"
	checkRuns(t, usage.HarnessClaude, home, dir, sid, "claude-sonnet-4-5", srv, func(first bool) {
		flag := "--session-id"
		if !first {
			flag = "--resume"
		}
		runCLI(t, dir, env, claude, "-p", "say done", flag, sid, "--model", "claude-sonnet-4-5", "--output-format", "text")
	})
}

func TestRealCodexSessionLog(t *testing.T) {
	codex := agentcli.Find(t, "codex", "codex-cli")
	home, dir := t.TempDir(), t.TempDir()
	srv := serveModel(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) (usage.Tokens, bool) {
		if !strings.HasSuffix(r.URL.Path, "/responses") {
			_ = json.NewEncoder(w).Encode(map[string]any{"object": "list", "data": []any{}, "models": []any{}})
			return usage.Tokens{}, false
		}
		// OpenAI's counts: input_tokens includes the cached ones,
		// output_tokens the reasoning ones.
		tok := usage.Tokens{Input: int64(1000 + n), Output: int64(200 + n), CacheRead: int64(4000 + n)}
		item := map[string]any{"id": "msg_standin", "type": "message", "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": "Done.", "annotations": []any{}}}}
		w.Header().Set("Content-Type", "text/event-stream")
		agentcli.SSE(w, "response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": "resp_standin", "object": "response", "status": "in_progress", "output": []any{}}})
		agentcli.SSE(w, "response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
		agentcli.SSE(w, "response.completed", map[string]any{"type": "response.completed", "response": map[string]any{"id": fmt.Sprintf("resp_standin_%d", n), "object": "response", "status": "completed", "output": []any{item},
			"usage": map[string]any{"input_tokens": tok.Input + tok.CacheRead, "output_tokens": tok.Output, "total_tokens": tok.Input + tok.CacheRead + tok.Output,
				"input_tokens_details": map[string]any{"cached_tokens": tok.CacheRead}, "output_tokens_details": map[string]any{"reasoning_tokens": 50}}}})
		return tok, true
	})
	codexHome := filepath.Join(home, ".codex")
	require.NoError(t, os.MkdirAll(codexHome, 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(`model = "gpt-5-codex"
model_provider = "standin"
[model_providers.standin]
name = "stand-in"
base_url = "`+srv.url+`/v1"
wire_api = "responses"
env_key = "STANDIN_API_KEY"
`), 0o600))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir(), "LANG=C.UTF-8", "STANDIN_API_KEY=standin", "NO_COLOR=1"}
	checkRuns(t, usage.HarnessCodex, home, dir, "", "gpt-5-codex", srv, func(first bool) {
		if first {
			runCLI(t, dir, env, codex, "exec", "--skip-git-repo-check", "say done")
		} else {
			runCLI(t, dir, env, codex, "exec", "--skip-git-repo-check", "resume", "--last", "say done again")
		}
	})
}

func TestRealGeminiChatRecord(t *testing.T) {
	gemini := agentcli.Find(t, "gemini", "gemini-cli")
	home, dir := t.TempDir(), t.TempDir()
	srv := serveModel(t, func(w http.ResponseWriter, r *http.Request, body []byte, n int) (usage.Tokens, bool) {
		switch {
		case strings.Contains(r.URL.Path, ":countTokens"):
			_ = json.NewEncoder(w).Encode(map[string]any{"totalTokens": 10})
		case strings.Contains(r.URL.Path, ":streamGenerateContent"):
			// Gemini's counts: promptTokenCount includes the cached
			// ones; thoughts are billed as output.
			tok := usage.Tokens{Input: int64(1000 + n), Output: int64(200+n) + 50, CacheRead: int64(4000 + n)}
			w.Header().Set("Content-Type", "text/event-stream")
			agentcli.SSE(w, "", map[string]any{"candidates": []any{map[string]any{"index": 0,
				"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": "Done."}}}, "finishReason": "STOP"}},
				"usageMetadata": map[string]any{"promptTokenCount": tok.Input + tok.CacheRead, "cachedContentTokenCount": tok.CacheRead,
					"candidatesTokenCount": 200 + n, "thoughtsTokenCount": 50, "totalTokenCount": tok.Input + tok.CacheRead + tok.Output},
				"modelVersion": "gemini-2.5-pro"})
			return tok, true
		case strings.Contains(r.URL.Path, ":generateContent"):
			text := `{"reasoning": "stand-in", "model_choice": "flash", "next_speaker": "user"}`
			_ = json.NewEncoder(w).Encode(map[string]any{"candidates": []any{map[string]any{"index": 0,
				"content": map[string]any{"role": "model", "parts": []any{map[string]any{"text": text}}}, "finishReason": "STOP"}},
				"usageMetadata": map[string]any{"promptTokenCount": 7, "candidatesTokenCount": 1, "totalTokenCount": 8}})
		default:
			http.NotFound(w, r)
		}
		return usage.Tokens{}, false
	})
	require.NoError(t, os.MkdirAll(filepath.Join(home, ".gemini"), 0o700))
	require.NoError(t, os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), []byte(`{"security": {"auth": {"selectedType": "gemini-api-key"}}, "general": {"disableAutoUpdate": true}, "privacy": {"usageStatisticsEnabled": false}}`), 0o600))
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + home, "TMPDIR=" + os.TempDir(), "LANG=C.UTF-8", "GOOGLE_GEMINI_BASE_URL=" + srv.url, "GEMINI_API_KEY=standin-key",
		"GEMINI_CLI_NO_RELAUNCH=true", "GEMINI_TELEMETRY_ENABLED=false", "NO_COLOR=1"}
	const sid = "3f1c2b7e-0d4a-4c3e-9b1f-6a2d8e5c7b10"
	checkRuns(t, usage.HarnessGemini, home, dir, sid, "gemini-2.5-pro", srv, func(first bool) {
		flag := "--session-id"
		if !first {
			flag = "--resume"
		}
		runCLI(t, dir, env, gemini, "-p", "say done", "-m", "gemini-2.5-pro", "--skip-trust", flag, sid)
	})
}
