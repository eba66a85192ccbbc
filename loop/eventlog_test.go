package loop

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphtest"
)

var t0 = time.Date(2026, 5, 2, 9, 40, 12, 345678900, time.UTC)

func TestFormatEventLine(t *testing.T) {
	cases := []struct {
		name string
		e    graph.LogEvent
		want string
	}{
		{
			name: "envelope then fields in order",
			e: graph.LogEvent{Time: t0, Name: "graph.advanced", Level: graph.LevelInfo, Fields: []graph.Field{
				{Key: "work_item", Value: "github:octo/app#109"}, {Key: "node", Value: "design"}, {Key: "to", Value: "tasks"}, {Key: "outcome", Value: "approved"},
			}},
			want: `{"ts":"2026-05-02T09:40:12.345Z","source":"loopctl","event":"graph.advanced","level":"info","pid":42,"work_item":"github:octo/app#109","node":"design","to":"tasks","outcome":"approved"}`,
		},
		{
			name: "UTC, empty level is info, nil omitted",
			e: graph.LogEvent{Time: t0.In(time.FixedZone("X", 2*3600)), Name: "graph.cleaned", Fields: []graph.Field{
				{Key: "work_item", Value: "issue-1"}, {Key: "from", Value: "design"}, {Key: "reason", Value: nil}, {Key: "nodes", Value: []string(nil)}, {Key: "parked", Value: (*graph.Parked)(nil)},
			}},
			want: `{"ts":"2026-05-02T09:40:12.345Z","source":"loopctl","event":"graph.cleaned","level":"info","pid":42,"work_item":"issue-1","from":"design"}`,
		},
		{
			name: "non-ASCII escaped, <>& kept",
			e: graph.LogEvent{Time: t0, Name: "graph.blocked", Level: graph.LevelWarning, Fields: []graph.Field{
				{Key: "hook", Value: "validate <design.md> & co — ünï 🚀"},
			}},
			want: `{"ts":"2026-05-02T09:40:12.345Z","source":"loopctl","event":"graph.blocked","level":"warning","pid":42,"hook":"validate <design.md> & co \u2014 \u00fcn\u00ef \ud83d\ude80"}`,
		},
		{
			name: "values of every shape",
			e: graph.LogEvent{Time: t0, Name: "x", Fields: []graph.Field{
				{Key: "attempts", Value: 3}, {Key: "repeated", Value: true}, {Key: "nodes", Value: []string{"a", "b"}},
				{Key: "error", Value: errors.New("boom")}, {Key: "nan", Value: math.NaN()}, {Key: "ch", Value: make(chan int)},
				{Key: "map", Value: map[string]int{"b": 2, "a": 1}},
			}},
			want: `{"ts":"2026-05-02T09:40:12.345Z","source":"loopctl","event":"x","level":"info","pid":42,"attempts":3,"repeated":true,"nodes":["a","b"],"error":"boom","nan":"NaN","ch":"CHAN","map":{"a":1,"b":2}}`,
		},
		{
			name: "the envelope cannot be overridden and keys are unique",
			e: graph.LogEvent{Time: t0, Name: "x", Fields: []graph.Field{
				{Key: "event", Value: "forged"}, {Key: "ts", Value: "then"}, {Key: "pid", Value: 1}, {Key: "a", Value: 1}, {Key: "a", Value: 2},
			}},
			want: `{"ts":"2026-05-02T09:40:12.345Z","source":"loopctl","event":"x","level":"info","pid":42,"a":1}`,
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got := string(FormatEventLine("loopctl", 42, tc.e))
			if strings.Contains(tc.want, `"CHAN"`) {
				// A channel's %v is its address: check the shape only.
				i := strings.Index(got, `"ch":"0x`)
				require.Positive(t, i, got)
				j := strings.Index(got[i+6:], `"`)
				got = got[:i] + `"ch":"CHAN` + got[i+6+j:]
			}
			assert.Equal(t, tc.want+"\n", got)
			assert.True(t, json.Valid([]byte(got)))
		})
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
}

func TestEventLogAppendsLines(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "logs", "events.jsonl")
	clock := graphtest.NewClock(t0)
	a, err := OpenEventLog(path, "loopd", EventLogOptions{Clock: clock, PID: 7})
	require.NoError(t, err, "the directory is created")
	b, err := OpenEventLog(path, "loop-gate", EventLogOptions{Clock: clock, PID: 8})
	require.NoError(t, err)
	a.Emit(graph.LogEvent{Name: "graph.started", Fields: []graph.Field{{Key: "work_item", Value: "issue-1"}}})
	b.Emit(graph.LogEvent{Name: "graph.blocked", Time: t0.Add(time.Second)})
	a.Emit(graph.LogEvent{Name: "graph.parked"})
	require.NoError(t, a.Close())
	a.Emit(graph.LogEvent{Name: "after.close"})
	require.NoError(t, b.Close())

	assert.Equal(t, []string{
		`{"ts":"2026-05-02T09:40:12.345Z","source":"loopd","event":"graph.started","level":"info","pid":7,"work_item":"issue-1"}`,
		`{"ts":"2026-05-02T09:40:13.345Z","source":"loop-gate","event":"graph.blocked","level":"info","pid":8}`,
		`{"ts":"2026-05-02T09:40:12.345Z","source":"loopd","event":"graph.parked","level":"info","pid":7}`,
	}, readLines(t, path), "a zero Time is stamped by the clock; events after Close are dropped")

	var nilLog *EventLog
	nilLog.Emit(graph.LogEvent{Name: "x"}) // a nil log discards
	assert.NoError(t, nilLog.Close())
	_, err = OpenEventLog("", "x", EventLogOptions{})
	assert.Error(t, err)
}

func TestEventLogConcurrentGoroutines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := OpenEventLog(path, "t", EventLogOptions{MaxBytes: 2000, MaxBackups: 1000})
	require.NoError(t, err)
	var wg sync.WaitGroup
	const goroutines, each = 8, 100
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				l.Emit(graph.LogEvent{Name: "test.seq", Fields: []graph.Field{{Key: "writer", Value: strconv.Itoa(g)}, {Key: "seq", Value: i}}})
			}
		}()
	}
	wg.Wait()
	require.NoError(t, l.Close())
	assertEverySeqOnce(t, path, goroutines, each)
}

// A Background log takes lines from many goroutines through its writer:
// every line once, in order per goroutine, none torn, across rotations;
// Flush makes what was emitted readable; Close writes what is queued.
func TestEventLogBackground(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := OpenEventLog(path, "t", EventLogOptions{MaxBytes: 2000, MaxBackups: 1000, Background: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	const goroutines, each = 8, 100
	for g := range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				l.Emit(graph.LogEvent{Name: "test.seq", Fields: []graph.Field{{Key: "writer", Value: strconv.Itoa(g)}, {Key: "seq", Value: i}}})
				if i%10 == 9 {
					l.Flush() // writes of a few lines each, so the file rotates
				}
			}
		}()
	}
	wg.Wait()
	l.Flush()
	assertEverySeqOnce(t, path, goroutines, each)

	l.Emit(graph.LogEvent{Name: "test.flushed"})
	l.Flush()
	recs, err := ReadEvents(path, EventQuery{Event: "test.flushed"})
	require.NoError(t, err)
	require.Len(t, recs, 1, "Flush returns after the line is in the file")

	l.Emit(graph.LogEvent{Name: "test.closing"})
	require.NoError(t, l.Close())
	l.Emit(graph.LogEvent{Name: "test.after-close"})
	l.Flush()
	recs, err = ReadEvents(path, EventQuery{Event: "test.closing"})
	require.NoError(t, err)
	require.Len(t, recs, 1, "Close writes what is queued")
	recs, err = ReadEvents(path, EventQuery{Event: "test.after-close"})
	require.NoError(t, err)
	require.Empty(t, recs, "lines after Close are dropped")
}

// One line formatted once goes to two logs of the same source.
func TestEventLogEmitLineToTwoLogs(t *testing.T) {
	dir := t.TempDir()
	clock := graphtest.NewClock(t0)
	a, err := OpenEventLog(filepath.Join(dir, "a.jsonl"), "loopd", EventLogOptions{Clock: clock, PID: 7, Background: true})
	require.NoError(t, err)
	b, err := OpenEventLog(filepath.Join(dir, "b.jsonl"), "loopd", EventLogOptions{Clock: clock, PID: 7})
	require.NoError(t, err)
	line := a.Line(graph.LogEvent{Name: "routing.routed", Fields: []graph.Field{{Key: "work_item", Value: "issue-1"}}})
	a.EmitLine(line)
	b.EmitLine(line)
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	want := []string{`{"ts":"2026-05-02T09:40:12.345Z","source":"loopd","event":"routing.routed","level":"info","pid":7,"work_item":"issue-1"}`}
	assert.Equal(t, want, readLines(t, filepath.Join(dir, "a.jsonl")))
	assert.Equal(t, want, readLines(t, filepath.Join(dir, "b.jsonl")))
}

// assertEverySeqOnce checks that the log (rotated files included) holds
// every (writer, seq) exactly once, in order per writer, and no torn line.
func assertEverySeqOnce(t *testing.T, path string, writers, each int) {
	t.Helper()
	next := map[string]int{}
	stats, err := ScanEvents(path, EventQuery{Event: "test.seq"}, func(r EventRecord) error {
		w, _ := r.Get("writer")
		s, _ := r.Get("seq")
		n, err := s.(json.Number).Int64()
		if err != nil {
			return err
		}
		if int(n) != next[w.(string)] {
			return fmt.Errorf("writer %v: seq %d after %d", w, n, next[w.(string)]-1)
		}
		next[w.(string)]++
		return nil
	})
	require.NoError(t, err)
	assert.Zero(t, stats.Malformed, "no torn or interleaved line")
	assert.Equal(t, writers*each, stats.Matched)
	assert.Len(t, next, writers)
	for w, n := range next {
		assert.Equal(t, each, n, "writer %s lost lines", w)
	}
	assert.Greater(t, stats.Files, 1, "the log rotated")
}

func TestEventLogRotation(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	l, err := OpenEventLog(path, "t", EventLogOptions{MaxBytes: 1000, MaxBackups: 3, Clock: graphtest.NewClock(t0), PID: 1})
	require.NoError(t, err)
	line := FormatEventLine("t", 1, graph.LogEvent{Time: t0, Name: "test.seq", Fields: []graph.Field{{Key: "seq", Value: 100}}})
	perFile := 1000 / len(line)
	for i := range 100 {
		l.Emit(graph.LogEvent{Name: "test.seq", Fields: []graph.Field{{Key: "seq", Value: 100 + i}}})
	}
	require.NoError(t, l.Close())

	assert.Equal(t, []string{"events.jsonl", "events.jsonl.1", "events.jsonl.2", "events.jsonl.3", "events.jsonl.lock"}, dirNames(t, filepath.Dir(path)),
		"at most MaxBackups rotated files are kept")
	for _, name := range []string{"events.jsonl", "events.jsonl.1", "events.jsonl.2", "events.jsonl.3"} {
		info, err := os.Stat(filepath.Join(filepath.Dir(path), name))
		require.NoError(t, err)
		assert.LessOrEqual(t, info.Size(), int64(1000), name)
	}
	recs, err := ReadEvents(path, EventQuery{})
	require.NoError(t, err)
	require.Len(t, recs, 3*perFile+len(readLines(t, path)), "the three backups are full, the live file holds the rest")
	for i, r := range recs {
		seq, _ := r.Get("seq")
		assert.Equal(t, json.Number(strconv.Itoa(200-len(recs)+i)), seq, "oldest first, newest last, none missing in between")
	}

	// A single line larger than MaxBytes is still written.
	l, err = OpenEventLog(path, "t", EventLogOptions{MaxBytes: 1000})
	require.NoError(t, err)
	l.Emit(graph.LogEvent{Name: "big", Fields: []graph.Field{{Key: "pad", Value: strings.Repeat("x", 3000)}}})
	l.Emit(graph.LogEvent{Name: "big", Fields: []graph.Field{{Key: "pad", Value: strings.Repeat("y", 3000)}}})
	require.NoError(t, l.Close())
	recs, err = ReadEvents(path, EventQuery{Event: "big"})
	require.NoError(t, err)
	assert.Len(t, recs, 2)
	assert.Len(t, readLines(t, path), 1)
}

func TestEventLogRotationAcrossProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	const procs, each = 4, 300
	var children []*exec.Cmd
	for p := range procs {
		c := helper(t, "emit", "LOOP_FS_LOG="+path, "LOOP_FS_N="+strconv.Itoa(each), "LOOP_FS_MAXBYTES=4096", "LOOP_FS_NAME=p"+strconv.Itoa(p))
		require.NoError(t, c.Start())
		children = append(children, c)
	}
	for _, c := range children {
		require.NoError(t, c.Wait())
	}
	assertEverySeqOnce(t, path, procs, each)
}

func TestEventLogFollowsRotationByAnotherWriter(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	a, err := OpenEventLog(path, "a", EventLogOptions{MaxBytes: 300})
	require.NoError(t, err)
	b, err := OpenEventLog(path, "b", EventLogOptions{MaxBytes: 300})
	require.NoError(t, err)
	a.Emit(graph.LogEvent{Name: "one"})
	for range 3 {
		b.Emit(graph.LogEvent{Name: "filler", Fields: []graph.Field{{Key: "pad", Value: strings.Repeat("z", 60)}}})
	}
	// b rotated the file a had open; a must write to the new one.
	a.Emit(graph.LogEvent{Name: "two"})
	require.NoError(t, a.Close())
	require.NoError(t, b.Close())
	recs, err := ReadEvents(path, EventQuery{Source: "a"})
	require.NoError(t, err)
	require.Len(t, recs, 2)
	live, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Contains(t, string(live), `"event":"two"`)

	// A log removed under a writer is recreated.
	require.NoError(t, os.Remove(path))
	c, err := OpenEventLog(path, "c", EventLogOptions{})
	require.NoError(t, err)
	require.NoError(t, os.Remove(path))
	c.Emit(graph.LogEvent{Name: "three"})
	require.NoError(t, c.Close())
	assert.Len(t, readLines(t, path), 1)
}

func TestEventLogWriteFailureIsReportedOnce(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "logs")
	path := filepath.Join(dir, "events.jsonl")
	var warnings bytes.Buffer
	l, err := OpenEventLog(path, "t", EventLogOptions{Warnings: &warnings})
	require.NoError(t, err)
	breakDir := func() {
		require.NoError(t, os.RemoveAll(dir))
		require.NoError(t, os.WriteFile(dir, []byte("a file where the log directory was"), 0o644))
	}
	breakDir()
	for range 3 {
		assert.NotPanics(t, func() { l.Emit(graph.LogEvent{Name: "lost"}) })
	}
	assert.Equal(t, 1, strings.Count(warnings.String(), "\n"), "reported once: %q", warnings.String())
	assert.Contains(t, warnings.String(), path)

	// Once writes work again, the held lines are written first, then the
	// new one; the next failure is reported again.
	require.NoError(t, os.Remove(dir))
	l.Emit(graph.LogEvent{Name: "kept"})
	lines := readLines(t, path)
	require.Len(t, lines, 4, "the three held lines, then the new one")
	assert.Contains(t, lines[3], `"event":"kept"`)
	breakDir()
	l.Emit(graph.LogEvent{Name: "lost"})
	l.Emit(graph.LogEvent{Name: "lost"})
	assert.Equal(t, 2, strings.Count(warnings.String(), "\n"))
	require.NoError(t, l.Close())
}

func TestReadEventsFilters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "events.jsonl")
	line := func(sec int, source, event string, fields ...graph.Field) string {
		return string(FormatEventLine(source, 1, graph.LogEvent{Time: t0.Add(time.Duration(sec) * time.Second), Name: event, Fields: fields}))
	}
	wi := func(v string) graph.Field { return graph.Field{Key: "work_item", Value: v} }
	// Rotated files hold older events; the reader goes oldest first.
	require.NoError(t, os.WriteFile(path+".2", []byte(line(0, "loopd", "graph.started", wi("github:octo/app#109"))), 0o644))
	require.NoError(t, os.WriteFile(path+".1", []byte(
		line(1, "loopd", "graph.advanced", wi("github:octo/app#109"))+
			"not json\n"+
			`{"ts":"2026-05-02T09:40:13.000Z","source":"x","level":"info","pid":1}`+"\n"+ // no event
			`{"ts":"yesterday","event":"x"}`+"\n"+
			"\n"+
			line(2, "poll", "dispatch.queued", graph.Field{Key: "work_items", Value: []string{"github:octo/app#7", "github:octo/app#109"}}),
	), 0o644))
	require.NoError(t, os.WriteFile(path, []byte(
		line(3, "loopctl", "graph.forced", wi("issue-109"))+
			line(4, "loopctl", "graph.advanced", wi("github:octo/lib#109"))+
			line(5, "loopd", "graph.blocked", wi("github:octo/app#7"))+
			line(6, "loopd", "graphx.other", wi("github:octo/app#109"))+
			`{"ts":"2026-05-02T09:40:19.345Z","event":"torn`, // a line being written
	), 0o644))
	require.NoError(t, os.WriteFile(path+".lock", nil, 0o644))
	require.NoError(t, os.WriteFile(path+".x", []byte(line(9, "x", "ignored")), 0o644))

	secs := func(recs []EventRecord) []int {
		var out []int
		for _, r := range recs {
			out = append(out, int(r.Time.Sub(t0.Truncate(time.Millisecond))/time.Second))
		}
		return out
	}
	cases := []struct {
		name string
		q    EventQuery
		want []int
	}{
		{"everything, oldest first", EventQuery{}, []int{0, 1, 2, 3, 4, 5, 6}},
		{"a ref matches itself, its bare id and work_items", EventQuery{WorkItem: "github:octo/app#109"}, []int{0, 1, 2, 3, 6}},
		{"a bare id matches every ref with its number", EventQuery{WorkItem: "issue-109"}, []int{0, 1, 2, 3, 4, 6}},
		{"a number", EventQuery{WorkItem: "#7"}, []int{2, 5}},
		{"no match", EventQuery{WorkItem: "issue-1"}, nil},
		{"exact event", EventQuery{Event: "graph.advanced"}, []int{1, 4}},
		{"prefix with a dot", EventQuery{Event: "graph."}, []int{0, 1, 3, 4, 5}},
		{"prefix with a star", EventQuery{Event: "graph*"}, []int{0, 1, 3, 4, 5, 6}},
		{"since", EventQuery{Since: t0.Add(3 * time.Second).Truncate(time.Millisecond)}, []int{3, 4, 5, 6}},
		{"until keeps what came before", EventQuery{Until: t0.Add(3 * time.Second).Truncate(time.Millisecond)}, []int{0, 1, 2}},
		{"a window, its newest", EventQuery{Since: t0.Add(time.Second).Truncate(time.Millisecond), Until: t0.Add(5 * time.Second).Truncate(time.Millisecond), Limit: 2}, []int{3, 4}},
		{"source", EventQuery{Source: "loopctl"}, []int{3, 4}},
		{"limit keeps the last", EventQuery{Limit: 2}, []int{5, 6}},
		{"combined", EventQuery{WorkItem: "issue-109", Event: "graph.", Limit: 2}, []int{3, 4}},
	}
	all, err := ReadEvents(path, EventQuery{})
	require.NoError(t, err)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			recs, err := ReadEvents(path, tc.q)
			require.NoError(t, err)
			assert.Equal(t, tc.want, secs(recs))
			// The lines skipped undecoded (lineNeedles) are lines Match
			// refuses: the same answer as decoding every line.
			var decoded []EventRecord
			for _, r := range all {
				if tc.q.Match(r) {
					decoded = append(decoded, r)
				}
			}
			if tc.q.Limit > 0 && len(decoded) > tc.q.Limit {
				decoded = decoded[len(decoded)-tc.q.Limit:]
			}
			assert.Equal(t, secs(decoded), secs(recs))
		})
	}
	stats, err := ScanEvents(path, EventQuery{}, func(EventRecord) error { return nil })
	require.NoError(t, err)
	assert.Equal(t, EventStats{Files: 3, Lines: 11, Malformed: 4, Matched: 7}, stats)

	recs, err := ReadEvents(filepath.Join(dir, "missing", "events.jsonl"), EventQuery{})
	require.NoError(t, err)
	assert.Empty(t, recs, "a missing log has no events")
}

func TestReadEventsSkipsOverlongLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	ok := string(FormatEventLine("s", 1, graph.LogEvent{Time: t0, Name: "ok"}))
	long := `{"ts":"2026-05-02T09:40:12.345Z","event":"long","pad":"` + strings.Repeat("x", maxEventLine) + "\"}\n"
	require.NoError(t, os.WriteFile(path, []byte(ok+long+ok+long[:len(long)-1]), 0o644))
	var stats EventStats
	var names []string
	stats, err := ScanEvents(path, EventQuery{}, func(r EventRecord) error { names = append(names, r.Event); return nil })
	require.NoError(t, err)
	assert.Equal(t, []string{"ok", "ok"}, names)
	assert.Equal(t, 2, stats.Malformed)
}

func TestParseEventLineRoundTrip(t *testing.T) {
	e := graph.LogEvent{Time: t0, Name: "graph.escalated", Level: graph.LevelWarning, Fields: []graph.Field{
		{Key: "work_item", Value: "github:octo/app#1"}, {Key: "attempts", Value: 3}, {Key: "repeated", Value: true}, {Key: "why", Value: "ünï <b>"},
	}}
	line := FormatEventLine("loopd", 99, e)
	rec, err := ParseEventLine(line)
	require.NoError(t, err)
	assert.Equal(t, t0.Truncate(time.Millisecond), rec.Time)
	assert.Equal(t, "loopd", rec.Source)
	assert.Equal(t, "graph.escalated", rec.Event)
	assert.Equal(t, graph.LevelWarning, rec.Level)
	assert.Equal(t, 99, rec.PID)
	assert.Equal(t, []graph.Field{
		{Key: "work_item", Value: "github:octo/app#1"}, {Key: "attempts", Value: json.Number("3")}, {Key: "repeated", Value: true}, {Key: "why", Value: "ünï <b>"},
	}, rec.Fields)
	assert.Equal(t, bytes.TrimSuffix(line, []byte("\n")), rec.Line)

	for _, bad := range []string{`[]`, `{"event":"x"}`, `{"ts":"2026-05-02T09:40:12Z"}`, `{"ts":"2026-05-02T09:40:12Z","event":""}`, `{"ts":1,"event":"x"}`,
		`{"ts":"2026-05-02T09:40:12Z","event":"x","pid":1.5}`, `{"ts":"2026-05-02T09:40:12Z","event":"x","level":2}`, `{"ts":"2026-05-02T09:40:12Z","event":"x"} {}`, `{"ts":"2026-05-02T09:40:12Z","event":"x"`} {
		_, err := ParseEventLine([]byte(bad))
		assert.Error(t, err, bad)
	}
}

func TestWorkItemMatches(t *testing.T) {
	cases := []struct {
		q, v string
		want bool
	}{
		{"github:o/r#1", "github:o/r#1", true},
		{"github:o/r#1", "issue-1", true},
		{"issue-1", "github:o/r#1", true},
		{"1", "github:o/r#1", true},
		{"#1", "issue-1", true},
		{"issue-01", "github:o/r#1", true},
		{"github:o/r#1", "github:o/s#1", false},
		{"issue-1", "github:o/r#10", false},
		{"issue-1", "issue-2", false},
		{"adhoc-x", "adhoc-x", true},
		{"adhoc-x", "github:o/r#1", false},
		{"issue-", "github:o/r#", false},
	}
	for _, tc := range cases {
		assert.Equal(t, tc.want, workItemMatches(tc.q, tc.v), "%q vs %q", tc.q, tc.v)
	}
}

// FuzzParseEventLine: no line may panic the reader, and whatever it
// accepts survives a round trip through FormatEventLine.
func FuzzParseEventLine(f *testing.F) {
	f.Add([]byte(`{"ts":"2026-05-02T09:40:12.345Z","source":"loopd","event":"graph.advanced","level":"info","pid":42,"work_item":"github:o/r#1","n":[1,{"a":null}]}`))
	f.Add([]byte(`{"ts":"2026-05-02T09:40:12+02:00","event":"x","event":"y","a":1,"a":2}`))
	f.Add([]byte(`{"ts":"2026-05-02T09:40:12Z","event":"\u00e9\ud83d\ude80","pid":1e3}`))
	f.Add([]byte(`not json`))
	f.Add([]byte(`{"ts":"0000-01-01T00:00:00+01:00","event":"0"}`)) // UTC year -1
	f.Add([]byte(`{"ts":"2026-05-02T09:40:12Z","event":"x"} trailing`))
	f.Fuzz(func(t *testing.T, line []byte) {
		rec, err := ParseEventLine(line)
		if err != nil {
			return
		}
		again := FormatEventLine(rec.Source, rec.PID, graph.LogEvent{Time: rec.Time, Name: rec.Event, Level: rec.Level, Fields: rec.Fields})
		rec2, err := ParseEventLine(again)
		if err != nil {
			t.Fatalf("re-encoded line does not parse: %v\n%s", err, again)
		}
		if !rec2.Time.Equal(rec.Time.Truncate(time.Millisecond)) {
			t.Fatalf("time %v became %v", rec.Time, rec2.Time)
		}
		if rec2.Event != rec.Event || rec2.Source != rec.Source || rec2.PID != rec.PID {
			t.Fatalf("envelope changed: %+v vs %+v", rec, rec2)
		}
		if rec.Level != "" && rec2.Level != rec.Level {
			t.Fatalf("level %q became %q", rec.Level, rec2.Level)
		}
	})
}
