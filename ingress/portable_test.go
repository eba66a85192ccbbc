package ingress

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/theloop-dev/theloop/workitem"
)

type fixedClock struct{ t time.Time }

func (c fixedClock) Now() time.Time { return c.t }

func mustRef(t testing.TB, s string) workitem.Ref {
	t.Helper()
	r, err := workitem.Parse(s)
	require.NoError(t, err)
	return r
}

func TestControlRecordSurvivesRestart(t *testing.T) {
	root := t.TempDir()
	clock := fixedClock{time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)}
	ref := mustRef(t, "github:octo/repo#15")
	s := NewPortableStore(root, clock)

	require.NoError(t, s.RecordControl(ref, ControlRecord{Command: CmdStart, Source: ControlFromComment, Actor: "alice", Note: "https://github.com/octo/repo/issues/15#issuecomment-1"}))
	// A section another component owns is kept byte for byte.
	path := s.Path(ref)
	require.Equal(t, filepath.Join(root, "portable", "github-octo-repo-15.json"), path)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.HasPrefix(string(data), "{\n  \"ref\": \"github:octo/repo#15\",\n  \"url\": \"https://github.com/octo/repo/issues/15\",\n  \"control\": {"), string(data))
	withGraph := strings.Replace(string(data), "\n}\n", ",\n  \"graph\": {\"loop\": \"pdlc-work-item-loop\"}\n}\n", 1)
	require.NoError(t, os.WriteFile(path, []byte(withGraph), 0o600))

	// A new store (a restarted daemon) reads it back.
	s2 := NewPortableStore(root, clock)
	rec, err := s2.Control(ref)
	require.NoError(t, err)
	require.Equal(t, &ControlRecord{Ref: "github:octo/repo#15", Command: CmdStart, Source: "comment", Actor: "alice",
		RequestedAt: "2026-11-30T12:00:00Z", Note: "https://github.com/octo/repo/issues/15#issuecomment-1"}, rec)
	armed, err := s2.StartRequested(ref)
	require.NoError(t, err)
	require.True(t, armed)

	require.NoError(t, s2.RecordControl(ref, ControlRecord{Command: CmdStop, Source: ControlFromCLI, Actor: "operator"}))
	armed, err = s2.StartRequested(ref)
	require.NoError(t, err)
	require.False(t, armed)
	data, err = os.ReadFile(path)
	require.NoError(t, err)
	var m map[string]any
	require.NoError(t, json.Unmarshal(data, &m))
	require.Equal(t, map[string]any{"loop": "pdlc-work-item-loop"}, m["graph"])

	// Clear writes a tombstone; the graph section keeps the file alive.
	require.NoError(t, s2.ClearControl(ref))
	rec, err = s2.Control(ref)
	require.NoError(t, err)
	require.Nil(t, rec)
	data, _ = os.ReadFile(path)
	require.Contains(t, string(data), `"control": null`)
}

func TestControlRecordRefusals(t *testing.T) {
	s := NewPortableStore(t.TempDir(), nil)
	ref := mustRef(t, "github:octo/repo#1")
	require.Error(t, s.RecordControl(ref, ControlRecord{Command: "force", Source: ControlFromCLI, Actor: "a"}))
	require.Error(t, s.RecordControl(ref, ControlRecord{Command: CmdStart, Source: "slack", Actor: "a"}))
	require.Error(t, s.RecordControl(ref, ControlRecord{Command: CmdStart, Source: ControlFromComment}))
	_, err := os.Stat(s.Path(ref))
	require.ErrorIs(t, err, os.ErrNotExist)

	// A record with no section left is deleted.
	require.NoError(t, s.RecordControl(ref, ControlRecord{Command: CmdPause, Source: ControlFromCLI, Actor: "a"}))
	require.NoError(t, s.ClearControl(ref))
	_, err = os.Stat(s.Path(ref))
	require.ErrorIs(t, err, os.ErrNotExist)
}

func TestPortableCorruptRecordMovedAside(t *testing.T) {
	root := t.TempDir()
	s := NewPortableStore(root, fixedClock{time.Unix(1700000000, 0)})
	ref := mustRef(t, "github:octo/repo#2")
	require.NoError(t, os.MkdirAll(s.Dir(), 0o700))
	require.NoError(t, os.WriteFile(s.Path(ref), []byte("{not json"), 0o600))
	_, err := s.Control(ref)
	require.ErrorIs(t, err, ErrCorruptRecord)
	armed, err := s.StartRequested(ref)
	require.False(t, armed)
	require.Error(t, err)
	require.NoError(t, s.RecordControl(ref, ControlRecord{Command: CmdStart, Source: ControlFromCLI, Actor: "a"}))
	_, err = os.Stat(s.Path(ref) + ".corrupt-1700000000")
	require.NoError(t, err)
	rec, err := s.Control(ref)
	require.NoError(t, err)
	require.Equal(t, CmdStart, rec.Command)
}

func TestPortableSlugCollisionRefused(t *testing.T) {
	s := NewPortableStore(t.TempDir(), nil)
	a, b := mustRef(t, "github:a-b/c#1"), mustRef(t, "github:a/b-c#1")
	require.Equal(t, s.Path(a), s.Path(b))
	require.NoError(t, s.RecordControl(a, ControlRecord{Command: CmdStart, Source: ControlFromCLI, Actor: "x"}))
	require.ErrorContains(t, s.RecordControl(b, ControlRecord{Command: CmdStart, Source: ControlFromCLI, Actor: "x"}), "share a slug")
}

func TestPollLedgerRoundTrip(t *testing.T) {
	s := NewPortableStore(t.TempDir(), nil)
	ref := mustRef(t, "github:ghe.example.com/corp/app#3")
	l, err := s.PollLedger(ref)
	require.NoError(t, err)
	require.Nil(t, l)
	l = &PollLedger{}
	for i := range MaxSeenComments + 5 {
		l.Resolve("comment-" + strconv.Itoa(i))
	}
	require.Len(t, l.SeenComments, MaxSeenComments)
	l.CommentAttempts = map[string]int{"comment-z": 2}
	require.NoError(t, s.SavePollLedger(ref, l))
	got, err := s.PollLedger(ref)
	require.NoError(t, err)
	require.Equal(t, l.SeenComments, got.SeenComments)
	require.Equal(t, 2, got.CommentAttempts["comment-z"])
	refs, err := s.PolledRefs()
	require.NoError(t, err)
	require.Equal(t, []workitem.Ref{ref}, refs)
	require.NoError(t, s.DropPollLedger(ref))
	refs, err = s.PolledRefs()
	require.NoError(t, err)
	require.Empty(t, refs)
}

func TestControlledRefs(t *testing.T) {
	s := NewPortableStore(t.TempDir(), nil)
	a, b := mustRef(t, "github:octo/repo#1"), mustRef(t, "github:octo/repo#2")
	require.NoError(t, s.RecordControl(a, ControlRecord{Command: CmdStart, Source: ControlFromCLI, Actor: "x"}))
	require.NoError(t, s.SavePollLedger(b, &PollLedger{}))
	refs, err := s.ControlledRefs()
	require.NoError(t, err)
	require.Equal(t, []workitem.Ref{a}, refs, "a poll section alone is no control record")
	require.NoError(t, s.ClearControl(a))
	refs, err = s.ControlledRefs()
	require.NoError(t, err)
	require.Empty(t, refs, "a tombstone is no control record")
}
