package ingress

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestAppendJSONMatchesMarshal(t *testing.T) {
	comment := fixture(t, "issue_comment/created.payload.json")
	r, err := NewRouter(testConfig(), RouterDeps{})
	require.NoError(t, err)
	ev, _, err := r.Route("issue_comment", "d-1", mustJSON(t, map[string]any{
		"action": "created", "repository": repoJSON("octo/repo"), "issue": map[string]any{"number": 1},
		"comment": map[string]any{"id": 5, "body": "the-loop start\n<b>\"x\"</b>", "html_url": "u", "updated_at": "t", "user": map[string]any{"login": "alice"}},
		"sender":  map[string]any{"login": "alice"},
	}))
	require.NoError(t, err)
	for _, e := range []*Event{ev, {Event: "ping", DeliveryID: "p", Source: SourceCLI}, {Event: "x", DeliveryID: "big", Payload: comment}} {
		got, err := e.AppendJSON([]byte("prefix"))
		require.NoError(t, err)
		want, err := json.Marshal(e)
		require.NoError(t, err)
		require.Equal(t, "prefix", string(got[:6]))
		require.JSONEq(t, string(want), string(got[6:]))
		back, err := DecodeEvent(got[6:])
		require.NoError(t, err)
		again, _ := json.Marshal(back)
		require.JSONEq(t, string(want), string(again))
	}
}

func BenchmarkEventEncode(b *testing.B) {
	raw := fixture(b, "issue_comment/created.payload.json")
	r, _ := NewRouter(testConfig(), RouterDeps{})
	ev, _, _ := r.Route("issue_comment", "d", raw)
	b.Run("AppendJSON", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 64<<10)
		for b.Loop() {
			buf, _ = ev.AppendJSON(buf[:0])
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_, _ = json.Marshal(ev)
		}
	})
}
