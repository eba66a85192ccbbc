package graph_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
)

func TestMarshalStateKeyOrderAndEscaping(t *testing.T) {
	st := graph.NewState("issue-42")
	now := time.Date(2026, 5, 2, 9, 0, 0, 0, time.UTC)
	st.Enter("phase-selection", now)
	st.Exit("phase-selection", "selected", now)
	st.Enter("brainstorming", now)
	st.NoteBlock("brainstorming", "`validate-artifacts` did not pass:\n- artifact is not locked — x <y> & z")
	st.Skips.Set("design", graph.SkipDecl{Via: "cli", Token: "design", By: "@dana", Reason: "café 🚀", At: now.UTC().Format("2006-01-02T15:04:05") + "+00:00"})
	b, err := graph.MarshalState(st)
	require.NoError(t, err)
	s := string(b)

	// Top-level keys in the documented order.
	var last int
	for _, k := range []string{"version", "workItem", "currentNode", "nodes", "decisions", "forced", "parked", "session", "completions", "skips", "optIns", "surface", "loop"} {
		i := strings.Index(s, "\n  \""+k+"\":")
		require.Greater(t, i, last, "key %s out of order", k)
		last = i
	}
	// Nodes in the order they were touched, record keys in order.
	require.Less(t, strings.Index(s, `"phase-selection": {`), strings.Index(s, `"brainstorming": {`))
	require.Contains(t, s, "\"attempts\": 2,\n      \"outcome\": \"\",\n      \"enteredAt\": \"2026-05-02T09:00:00+00:00\"")
	require.Contains(t, s, `is not locked \u2014 x <y> & z`, "non-ASCII escaped, HTML characters not")
	require.Contains(t, s, `caf\u00e9 \ud83d\ude80`, "astral runes become surrogate pairs")
	require.True(t, strings.HasSuffix(s, "}\n"))
	require.True(t, json.Valid(b))

	back, err := graph.ParseState("issue-42", b)
	require.NoError(t, err)
	again, err := graph.MarshalState(back)
	require.NoError(t, err)
	require.Equal(t, s, string(again), "round trip is byte-stable")
}

// A graph-state.json written by the Python the-loop reads and re-serialises
// byte for byte.
func TestStateRoundTripsReferenceFiles(t *testing.T) {
	root := filepath.Join("..", "..", "shared", "conformance", "the-loop-v11", "repo", "docs", "specs", "issue-239")
	files := []string{"graph-state.json", filepath.Join("pr-loops", "pr-244", "graph-state.json")}
	for _, name := range files {
		data, err := os.ReadFile(filepath.Join(root, name))
		if errors.Is(err, os.ErrNotExist) {
			t.Skip("conformance data not present")
		}
		require.NoError(t, err)
		st, err := graph.ParseState("issue-239", data)
		require.NoError(t, err)
		out, err := graph.MarshalState(st)
		require.NoError(t, err)
		require.Equal(t, string(data), string(out), name)
	}
}

func TestParseStateIsTolerant(t *testing.T) {
	cases := []struct {
		name, in string
		check    func(t *testing.T, st *graph.State)
	}{
		{"empty object", `{}`, func(t *testing.T, st *graph.State) {
			require.Equal(t, "w", st.WorkItem)
			require.Equal(t, 1, st.Version)
			require.Equal(t, "", st.CurrentNode)
			require.NotNil(t, st.Forced)
		}},
		{"non-object node record dropped", `{"currentNode":"a","nodes":{"a":{"attempts":2},"b":"junk","c":[1]}}`, func(t *testing.T, st *graph.State) {
			require.Equal(t, []string{"a"}, st.Nodes.Keys())
			require.Equal(t, 2, st.Record("a").Attempts)
		}},
		{"mistyped field keeps the rest", `{"currentNode":"a","skips":"nope","surface":7,"loop":"l"}`, func(t *testing.T, st *graph.State) {
			require.Equal(t, "a", st.CurrentNode)
			require.Equal(t, 0, st.Skips.Len())
			require.Equal(t, "l", st.Loop)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			st, err := graph.ParseState("w", []byte(tc.in))
			require.NoError(t, err)
			tc.check(t, st)
		})
	}
	for _, bad := range []string{"", "[]", "null", `{"a":`, "not json"} {
		_, err := graph.ParseState("w", []byte(bad))
		require.ErrorIs(t, err, graph.ErrCorruptState, bad)
	}
}

func FuzzParseState(f *testing.F) {
	f.Add([]byte(`{"version":1,"workItem":"w","currentNode":"a","nodes":{"a":{"attempts":1}},"skips":{"b":{"via":"cli"}}}`))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"nodes":{"a":null},"parked":{"node":"a"},"forced":[{"from":"a"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		st, err := graph.ParseState("w", data)
		if err != nil {
			return
		}
		out, err := graph.MarshalState(st)
		if err != nil {
			t.Fatalf("a parsed state must serialise: %v", err)
		}
		if !json.Valid(out) {
			t.Fatalf("invalid JSON written: %q", out)
		}
		if _, err := graph.ParseState("w", out); err != nil {
			t.Fatalf("written state does not parse back: %v", err)
		}
		_ = bytes.TrimSpace(out)
	})
}

func TestOrderedMapKeepsKeyOrderThroughEscapes(t *testing.T) {
	var m graph.OrderedMap[graph.Completion]
	require.NoError(t, json.Unmarshal([]byte(`{"z\"q": {"by": "a"}, "a": "skip", "m\\": {"by": "{"}, "b": {"by": ","}}`), &m))
	require.Equal(t, []string{"z\"q", "m\\", "b"}, m.Keys())
	c, _ := m.Get("b")
	require.Equal(t, ",", c.By)
}

func FuzzOrderedMapKeys(f *testing.F) {
	f.Add([]byte(`{"a": {}, "b": {"x": "}"}, "c\"": {}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m graph.OrderedMap[graph.Completion]
		if err := json.Unmarshal(data, &m); err != nil {
			return
		}
		var plain map[string]json.RawMessage
		if json.Unmarshal(data, &plain) != nil {
			return
		}
		for _, k := range m.Keys() {
			if _, ok := plain[k]; !ok {
				t.Fatalf("key %q is not in the object", k)
			}
		}
		for k, raw := range plain {
			var c graph.Completion
			trimmed := bytes.TrimSpace(raw)
			if len(trimmed) > 0 && trimmed[0] == '{' && json.Unmarshal(raw, &c) == nil && !m.Has(k) {
				t.Fatalf("object entry %q was lost", k)
			}
		}
	})
}
