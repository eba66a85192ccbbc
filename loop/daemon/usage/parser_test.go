package usage

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"
)

// Seeds: lines as each real CLI writes them (realcli_test.go reads the
// real ones), plus what an agent could write instead.
var (
	claudeSeeds = []string{
		`{"parentUuid":"a","type":"assistant","message":{"id":"msg_1","model":"claude-sonnet-4-5","role":"assistant","usage":{"input_tokens":1001,"cache_creation_input_tokens":301,"cache_read_input_tokens":4001,"output_tokens":201}},"requestId":"req_1","uuid":"u1","timestamp":"2026-12-03T14:32:41.772Z"}`,
		`{"type":"user","message":{"role":"user","content":"hello"}}`,
		`{"type":"assistant","message":{"id":"msg_2","model":"<synthetic>","usage":{"input_tokens":0,"output_tokens":0}}}`,
		`{"type":"assistant","message":{"id":"msg_3","model":"x","usage":{"input_tokens":-5,"output_tokens":99999999999}}}`,
		`{"type":"assistant","message":null}`,
		`not json`,
	}
	codexSeeds = []string{
		`{"timestamp":"2026-12-03T14:32:48.601Z","type":"turn_context","payload":{"model":"gpt-5-codex"}}`,
		`{"timestamp":"2026-12-03T14:32:48.642Z","type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1002,"cached_input_tokens":402,"cache_write_input_tokens":0,"output_tokens":202,"reasoning_output_tokens":52,"total_tokens":1204},"last_token_usage":{"input_tokens":1002,"cached_input_tokens":402,"output_tokens":202}}}}`,
		`{"type":"event_msg","payload":{"type":"token_count","info":null}}`,
		`{"type":"event_msg","payload":{"type":"token_count","info":{"last_token_usage":{"input_tokens":5,"output_tokens":1}}}}`,
		`{"type":"session_meta","payload":{"cwd":"/x"}}`,
	}
	geminiSeeds = []string{
		`{"sessionId":"11111111-2222-3333-4444-555555555555","projectHash":"h","startTime":"2026-12-03T14:32:58.880Z","kind":"main"}`,
		`{"id":"e4","timestamp":"2026-12-03T14:32:59.002Z","type":"gemini","content":"Done.","tokens":{"input":1003,"output":203,"cached":403,"thoughts":53,"tool":0,"total":1259},"model":"gemini-2.5-pro"}`,
		`{"$set":{"messages":[{"id":"e4","type":"gemini","tokens":{"input":1003,"output":203,"cached":403},"model":"gemini-2.5-pro"}]}}`,
		`{"id":"e5","type":"gemini","tokens":{"input":10,"output":-1}}`,
		`{"id":"u1","type":"user","content":[{"text":"hello"}]}`,
	}
)

func parseAll(t *testing.T, harness string, lines []string) []Turn {
	p, ok := NewParser(harness)
	require.True(t, ok)
	var out []Turn
	for _, l := range lines {
		out = append(out, p.Line([]byte(l))...)
	}
	return out
}

func TestParsersReadEachHarnessesCounts(t *testing.T) {
	tests := []struct {
		harness string
		lines   []string
		want    []Tokens
		model   string
	}{
		{HarnessClaude, append(claudeSeeds, claudeSeeds[0]), // a block repeated: counted once
			[]Tokens{{Input: 1001, Output: 201, CacheWrite: 301, CacheRead: 4001}}, "claude-sonnet-4-5"},
		{HarnessCodex, append(codexSeeds, codexSeeds[1]), // a token_count repeated: the total did not grow
			[]Tokens{{Input: 600, Output: 202, CacheRead: 402}, {Input: 5, Output: 1}}, "gpt-5-codex"},
		{HarnessGemini, geminiSeeds, // $set restates e4: not counted again
			[]Tokens{{Input: 600, Output: 256, CacheRead: 403}}, "gemini-2.5-pro"},
	}
	for _, tc := range tests {
		t.Run(tc.harness, func(t *testing.T) {
			turns := parseAll(t, tc.harness, tc.lines)
			var got []Tokens
			for _, tr := range turns {
				got = append(got, tr.Tokens)
				require.Equal(t, tc.model, tr.Model)
			}
			require.Equal(t, tc.want, got)
		})
	}
	_, ok := NewParser("cursor")
	require.False(t, ok, "cursor keeps no record theloop reads: its usage is unknown")
}

func TestCodexTotalThatFallsBackIsANewThread(t *testing.T) {
	p, _ := NewParser(HarnessCodex)
	p.Line([]byte(codexSeeds[1]))
	got := p.Line([]byte(`{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":10,"output_tokens":2},"last_token_usage":{"input_tokens":10,"output_tokens":2}}}}`))
	require.Equal(t, []Turn{{Model: "unknown", Tokens: Tokens{Input: 10, Output: 2}}}, got)
}

func TestModelNamesAreCleaned(t *testing.T) {
	require.Equal(t, "claude-xb", cleanModel("claude-x\x00<b>"))
	require.Equal(t, "unknown", cleanModel("\x00\x01"))
	require.Len(t, cleanModel(strings.Repeat("a", 500)), maxModelName)
}

func writeFile(t *testing.T, p, s string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o700))
	require.NoError(t, os.WriteFile(p, []byte(s), 0o600))
}

func appendFile(t *testing.T, p, s string) {
	t.Helper()
	f, err := os.OpenFile(p, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(s)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func TestTailReadsIncrementallyAndWithBounds(t *testing.T) {
	home := t.TempDir()
	p := filepath.Join(home, ".gemini", "tmp", "x", "chats", "session-a-11111111.jsonl")
	writeFile(t, p, geminiSeeds[0]+"\n"+geminiSeeds[1]+"\n"+`{"id":"e6","type":"gemini","tok`) // the last line still being written
	tl, err := NewTail(HarnessGemini, home, p, Position{})
	require.NoError(t, err)
	turns, err := tl.Read()
	require.NoError(t, err)
	require.Len(t, turns, 1)
	off := tl.Pos.Offset
	require.Equal(t, int64(len(geminiSeeds[0])+len(geminiSeeds[1])+2), off, "the partial line is left for the next read")

	turns, err = tl.Read()
	require.NoError(t, err)
	require.Empty(t, turns, "nothing new")

	appendFile(t, p, `ens":{"input":7,"output":3},"model":"m"}`+"\n")
	turns, err = tl.Read()
	require.NoError(t, err)
	require.Equal(t, []Turn{{Model: "m", Tokens: Tokens{Input: 7, Output: 3}}}, turns, "the finished line, read from where the last read stopped")

	// A line past MaxLine is skipped whole, across reads.
	appendFile(t, p, `{"id":"big","type":"gemini","content":"`+strings.Repeat("x", MaxLine+10))
	turns, err = tl.Read()
	require.NoError(t, err)
	require.Empty(t, turns)
	require.True(t, tl.Pos.Skipping)
	appendFile(t, p, `","tokens":{"input":1,"output":1}}`+"\n"+`{"id":"e8","type":"gemini","tokens":{"input":2,"output":2},"model":"m"}`+"\n")
	turns, err = tl.Read()
	require.NoError(t, err)
	require.Equal(t, []Turn{{Model: "m", Tokens: Tokens{Input: 2, Output: 2}}}, turns)

	// A replaced file is read from its start (repeats still dropped).
	writeFile(t, p+".new", geminiSeeds[1]+"\n"+`{"id":"e9","type":"gemini","tokens":{"input":4,"output":4},"model":"m"}`+"\n")
	require.NoError(t, os.Rename(p+".new", p))
	turns, err = tl.Read()
	require.NoError(t, err)
	require.Equal(t, []Turn{{Model: "m", Tokens: Tokens{Input: 4, Output: 4}}}, turns)
}

func TestTailRefusesWhatTheAgentPlanted(t *testing.T) {
	home, outside := t.TempDir(), t.TempDir()
	secret := filepath.Join(outside, "secret.jsonl")
	writeFile(t, secret, claudeSeeds[0]+"\n")
	dir := filepath.Join(home, ".claude", "projects", "p")
	require.NoError(t, os.MkdirAll(dir, 0o700))

	// A link at the file.
	require.NoError(t, os.Symlink(secret, filepath.Join(dir, "s1.jsonl")))
	tl, _ := NewTail(HarnessClaude, home, filepath.Join(dir, "s1.jsonl"), Position{})
	_, err := tl.Read()
	require.Error(t, err)

	// A link as a parent directory.
	require.NoError(t, os.Symlink(outside, filepath.Join(home, ".claude", "projects", "q")))
	tl, _ = NewTail(HarnessClaude, home, filepath.Join(home, ".claude", "projects", "q", "secret.jsonl"), Position{})
	_, err = tl.Read()
	require.ErrorIs(t, err, ErrOutsideHome)

	// A FIFO never blocks the reader.
	fifo := filepath.Join(dir, "s2.jsonl")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	tl, _ = NewTail(HarnessClaude, home, fifo, Position{})
	_, err = tl.Read()
	require.ErrorIs(t, err, ErrNotRegular)
	require.Empty(t, Locate(HarnessClaude, Dirs{Home: home}, "", "../../x"), "a session id is a name, never a path")
}

func TestRatesPriceByLongestPrefix(t *testing.T) {
	r := Rates{"claude-sonnet-4": {Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}, "claude-sonnet-4-5": {Input: 1, Output: 1}}
	c, ok := r.Cost("claude-sonnet-4-5-20250929", Tokens{Input: 1_000_000, Output: 2_000_000})
	require.True(t, ok)
	require.InDelta(t, 3.0, c, 1e-9)
	c, ok = r.Cost("claude-sonnet-4-1", Tokens{Input: 1_000_000, CacheRead: 1_000_000, CacheWrite: 1_000_000})
	require.True(t, ok)
	require.InDelta(t, 7.05, c, 1e-9)
	_, ok = r.Cost("gpt-5", Tokens{Input: 1})
	require.False(t, ok, "no rate: no cost")
}

func TestLedgerReportsAndPersists(t *testing.T) {
	path := filepath.Join(t.TempDir(), "usage", "ledger.json")
	l, err := OpenLedger(path)
	require.NoError(t, err)
	k := Key{Repository: "o/r", Item: "o/r#1", Session: "s1", Harness: "claude", Node: "design", Model: "claude-sonnet-4-5", Day: "2026-12-03"}
	l.Charge(k, Turn{Tokens: Tokens{Input: 10, Output: 5}})
	k2 := k
	k2.Node, k2.Model = "implement", "other"
	l.Charge(k2, Turn{Tokens: Tokens{Input: 1}})
	l.SetPosition("/p", Position{Offset: 42})
	require.NoError(t, l.Save())
	l, err = OpenLedger(path)
	require.NoError(t, err)
	require.Equal(t, int64(42), l.Position("/p").Offset)
	rates := Rates{"claude-sonnet-4-5": {Input: 1e6, Output: 1e6}}
	rep, err := l.Report(Filter{Item: "o/r#1"}, "node", rates)
	require.NoError(t, err)
	require.Len(t, rep.Rows, 2)
	require.Equal(t, "design", rep.Rows[0].Key)
	require.InDelta(t, 15.0, *rep.Rows[0].Cost, 1e-9)
	require.Nil(t, rep.Rows[1].Cost, "no rate for other: cost —")
	require.Equal(t, []string{"other"}, rep.Rows[1].Unpriced)
	require.Nil(t, rep.Total.Cost)
	require.Equal(t, int64(16), rep.Total.Tokens.Total)
	_, err = l.Report(Filter{}, "colour", rates)
	require.Error(t, err)
	writeFile(t, path, "{not json")
	_, err = OpenLedger(path)
	require.ErrorContains(t, err, path)
}

func TestPrimeRestoresWhatTheParserKnew(t *testing.T) {
	home := t.TempDir()
	p := filepath.Join(home, "rollout.jsonl")
	writeFile(t, p, codexSeeds[0]+"\n"+codexSeeds[1]+"\n")
	tl, _ := NewTail(HarnessCodex, home, p, Position{})
	turns, err := tl.Read()
	require.NoError(t, err)
	require.Len(t, turns, 1)
	pos := tl.Pos
	// The thread goes on; a new process picks the record up at pos.
	appendFile(t, p, `{"type":"event_msg","payload":{"type":"token_count","info":{"total_token_usage":{"input_tokens":1102,"cached_input_tokens":402,"output_tokens":212}}}}`+"\n")
	tl2, _ := NewTail(HarnessCodex, home, p, Position{})
	require.NoError(t, tl2.Prime(pos))
	turns, err = tl2.Read()
	require.NoError(t, err)
	require.Equal(t, []Turn{{Model: "gpt-5-codex", Tokens: Tokens{Input: 100, Output: 10}}}, turns, "the growth of the running total, not the total")
}

// The indexed sums the board and the budgets use agree with a full scan.
func TestLedgerIndexedSumsAgreeWithTheScan(t *testing.T) {
	l, err := OpenLedger(filepath.Join(t.TempDir(), "l.json"))
	require.NoError(t, err)
	rates := Rates{"a": {Input: 2, Output: 3}}
	for i, k := range []Key{
		{Repository: "o/r", Item: "o/r#1", Node: "n1", Model: "a", Day: "2026-12-03"},
		{Repository: "o/r", Item: "o/r#1", Node: "n2", Model: "b", Day: "2026-12-04"},
		{Repository: "o/r", Item: "o/r#2", Node: "n1", Model: "a", Day: "2026-12-03"},
		{Repository: "o/s", Item: "o/s#1", Node: "n1", Model: "a", Day: "2026-12-03"},
	} {
		l.Charge(k, Turn{Tokens: Tokens{Input: int64(10 * (i + 1)), Output: int64(i + 1)}})
	}
	scan := func(f Filter) (Tokens, float64, bool) {
		var t Tokens
		cost, priced := 0.0, true
		l.Each(func(k Key, e Tally) {
			if f.match(k) {
				t = t.Add(e.Tokens)
				c, ok := rates.Cost(k.Model, e.Tokens)
				cost += c
				priced = priced && ok
			}
		})
		return t, cost, priced
	}
	for _, f := range []Filter{{Item: "o/r#1"}, {Item: "o/r#2"}, {Item: "none"}, {Repository: "o/r", Day: "2026-12-03"}, {Repository: "o/r", Day: "2026-12-05"}, {Repository: "o/r"}} {
		wt, wc, wp := scan(f)
		gt, gc, gp := l.Sum(f, rates)
		require.Equal(t, wt, gt, "%+v", f)
		require.InDelta(t, wc, gc, 1e-12, "%+v", f)
		require.Equal(t, wp, gp, "%+v", f)
	}
}
