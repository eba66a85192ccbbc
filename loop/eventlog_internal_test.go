package loop

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestEncodeJSONValueFastPaths: the int and plain-string fast paths write
// exactly what the JSON encoder (HTML escaping off) writes.
func TestEncodeJSONValueFastPaths(t *testing.T) {
	for _, v := range []any{
		0, -7, 1 << 40, "", "issue_comment", "github:Codertocat/Hello-World#1",
		"a<b>&c", "quote\"d", `back\slash`, "tab\there", "del\x7f", "é", "\u2028",
	} {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		require.NoError(t, enc.Encode(v))
		require.Equal(t, string(bytes.TrimRight(b.Bytes(), "\n")), string(encodeJSONValue(v)), "%#v", v)
	}
}

// FuzzLineNeedles: a line the needles skip undecoded is one Match would
// refuse once decoded — the prefilter never hides an event.
func FuzzLineNeedles(f *testing.F) {
	for _, s := range [][3]string{
		{`{"ts":"2026-11-30T12:00:00Z","event":"graph.advanced","work_item":"github:o/r#7"}`, "graph.*", "7"},
		{`{"ts":"2026-11-30T12:00:00Z","event":"graph.advanced","work_items":["issue-007"]}`, "graph.advanced", "#7"},
		{`{"ts":"2026-11-30T12:00:00Z","event":"session.spawned","work_item":"a\u0026b"}`, "session.", "a&b"},
		{`{"ts":"2026-11-30T12:00:00Z","event":"gr\u0061ph.x","work_item":"issue-1"}`, "graph.x", "issue-1"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, line, event, item string) {
		q := EventQuery{Event: event, WorkItem: item}
		rec, err := ParseEventLine([]byte(line))
		want := err == nil && q.Match(rec)
		got := false
		var stats EventStats
		_ = handleEventLine([]byte(line), q, q.lineNeedles(), &stats, func(EventRecord) error { got = true; return nil })
		if got != want {
			t.Fatalf("line %q, query %+v: scanned %v, decoded and matched %v", line, q, got, want)
		}
	})
}
