package stopgate

import (
	"errors"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestParsePayload(t *testing.T) {
	for _, tc := range []struct {
		name string
		in   string
		want Payload
		err  bool
	}{
		{name: "empty"},
		{name: "whitespace", in: " \n\t "},
		{name: "BOM only", in: "\xEF\xBB\xBF"},
		{
			name: "claude",
			in:   `{"session_id":"abc-1","transcript_path":"/t.jsonl","cwd":"/repo","permission_mode":"default","hook_event_name":"Stop","stop_hook_active":true}`,
			want: Payload{SessionID: "abc-1", Cwd: "/repo", Event: "Stop", StopHookActive: true},
		},
		{
			name: "cursor",
			in:   `{"conversation_id":"c-1","generation_id":"g-1","status":"completed","loop_count":2,"hook_event_name":"stop","workspace_roots":["/ws","/other"],"user_email":null}`,
			want: Payload{SessionID: "c-1", Cwd: "/ws", Event: "stop", Status: "completed", LoopCount: 2},
		},
		{
			name: "codex",
			in:   `{"session_id":"019a-thread","turn_id":"t-3","transcript_path":null,"cwd":"/repo","hook_event_name":"Stop","model":"gpt-5","permission_mode":"default","stop_hook_active":false,"last_assistant_message":"done"}`,
			want: Payload{SessionID: "019a-thread", Cwd: "/repo", Event: "Stop"},
		},
		{
			name: "gemini",
			in:   `{"session_id":"g-1","transcript_path":"/t.json","cwd":"/repo","hook_event_name":"AfterAgent","timestamp":"2026-12-01T19:00:00Z","prompt":"go","prompt_response":"done","stop_hook_active":true}`,
			want: Payload{SessionID: "g-1", Cwd: "/repo", Event: "AfterAgent", StopHookActive: true},
		},
		{
			name: "cursor: first usable workspace root",
			in:   `{"workspace_roots":[null, 3, "", "/ws"]}`,
			want: Payload{Cwd: "/ws"},
		},
		{
			name: "BOM and unknown fields",
			in:   "\xEF\xBB\xBF" + `{"cwd":"/repo","future":{"x":[1,2]},"session_id":"s"}`,
			want: Payload{SessionID: "s", Cwd: "/repo"},
		},
		{
			name: "fields of the wrong type are ignored one by one",
			in:   `{"cwd":7,"session_id":["x"],"stop_hook_active":"true","loop_count":-3,"workspace_roots":"/ws","status":"completed"}`,
			want: Payload{Status: "completed"},
		},
		{name: "session_id wins over conversation_id", in: `{"session_id":"a","conversation_id":"b"}`, want: Payload{SessionID: "a"}},
		{name: "cwd wins over workspace_roots", in: `{"cwd":"/a","workspace_roots":["/b"]}`, want: Payload{Cwd: "/a"}},
		{name: "huge loop_count", in: `{"loop_count":1e300}`},
		{name: "not an object", in: `["cwd"]`, err: true},
		{name: "null", in: `null`, err: true},
		{name: "truncated", in: `{"cwd":"/re`, err: true},
		{name: "text", in: `Stop`, err: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParsePayload([]byte(tc.in))
			if tc.err {
				require.ErrorIs(t, err, ErrPayload)
			} else {
				require.NoError(t, err)
			}
			require.Equal(t, tc.want, got)
		})
	}
}

func TestParseHarness(t *testing.T) {
	for in, want := range map[string]Harness{"": "claude", "claude": "claude", "cursor": "cursor", "codex": "codex", "gemini": "gemini"} {
		h, err := ParseHarness(in)
		require.NoError(t, err)
		require.Equal(t, want, h)
	}
	for _, in := range []string{"Claude", "openai", "--claude", "gemini-cli"} {
		_, err := ParseHarness(in)
		require.ErrorContains(t, err, "pass claude, cursor, codex or gemini")
	}
}

// FuzzParsePayload: any stdin parses without panicking; a failure is always
// ErrPayload with the zero Payload, and what is returned is valid text.
func FuzzParsePayload(f *testing.F) {
	for _, s := range []string{
		``,
		"\xEF\xBB\xBF{}",
		`{"session_id":"0b6f8f57-2d3c-4a54-9d8e-5f1f3e0c9a11","transcript_path":"/t","cwd":"/repo","hook_event_name":"Stop","stop_hook_active":false}`,
		`{"conversation_id":"c","generation_id":"g","status":"completed","loop_count":0,"hook_event_name":"stop","workspace_roots":["/ws"]}`,
		`{"workspace_roots":[null,{"a":1},"/ws"],"loop_count":"x"}`,
		`{"cwd":"\ud800"}`,
		`[1,2,3]`,
		`null`,
		`{"cwd":`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePayload(data)
		if err != nil {
			if !errors.Is(err, ErrPayload) || p != (Payload{}) {
				t.Fatalf("error %v with payload %+v", err, p)
			}
			return
		}
		for _, s := range []string{p.SessionID, p.Cwd, p.Event, p.Status} {
			if !utf8.ValidString(s) {
				t.Fatalf("invalid UTF-8 %q", s)
			}
		}
		if p.LoopCount < 0 {
			t.Fatalf("negative loop count %d", p.LoopCount)
		}
	})
}
