package sessions

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"github.com/theloop-dev/theloop/workitem"
)

func mustItem(t testing.TB, ref string) workitem.Ref {
	t.Helper()
	w, err := workitem.Parse(ref)
	require.NoError(t, err)
	return w
}

func testRecord(t testing.TB, ref, id string) Record {
	item := mustItem(t, ref)
	return Record{
		Item: item, Harness: "claude", SessionID: id, TmuxName: TmuxName(item),
		Cwd: "/srv/work/" + item.Slug(), Status: StatusActive,
		Created: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
	}
}

func TestRegistryRoundTrip(t *testing.T) {
	ctx := context.Background()
	reg, err := OpenRegistry(filepath.Join(t.TempDir(), "sessions"))
	require.NoError(t, err)
	rec := testRecord(t, "github:ghe.corp.example/my.org/my.repo#7", "0b5a3c1e-1f2a-4b3c-8d4e-5f6a7b8c9d0e")
	rec.LastDelivery = time.Date(2026, 1, 2, 4, 0, 0, 0, time.UTC)
	rec.Fallbacks = []Fallback{{At: rec.Created, PreviousSessionID: "old-id", Reason: "gone", Artifacts: []string{"docs/specs/issue-7/design.md"}}}
	require.NoError(t, reg.Put(ctx, rec))

	got, err := reg.Get(rec.Item)
	require.NoError(t, err)
	require.Equal(t, rec, got)

	// The file is the documented shape, pretty-printed, mode 0600, and no
	// temp files are left behind.
	path := filepath.Join(reg.Dir(), rec.Item.Slug()+".json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	require.True(t, strings.HasSuffix(string(data), "}\n"))
	var raw map[string]any
	require.NoError(t, json.Unmarshal(data, &raw))
	require.Equal(t, "github:ghe.corp.example/my.org/my.repo#7", raw["workItem"].(map[string]any)["ref"])
	require.Equal(t, "loop-github-ghe_corp_example-my_org-my_repo-7", raw["tmuxTarget"])
	require.Equal(t, "2026-01-02T03:04:05Z", raw["createdAt"])
	require.Equal(t, "2026-01-02T04:00:00Z", raw["lastDeliveryAt"])
	require.Equal(t, "https://ghe.corp.example/my.org/my.repo/issues/7", raw["url"])
	fi, err := os.Stat(path)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm())
	entries, err := os.ReadDir(reg.Dir())
	require.NoError(t, err)
	for _, e := range entries {
		require.NotContains(t, e.Name(), ".tmp-", "temp file left behind")
	}
}

// A work item's record lists its linked pull requests; a PR's own session
// is a record naming its parent (docs/daemon.md §6.7).
func TestRegistryRoundTripPRLinksAndParent(t *testing.T) {
	ctx := context.Background()
	reg, err := OpenRegistry(filepath.Join(t.TempDir(), "sessions"))
	require.NoError(t, err)
	owner := testRecord(t, "github:octo/repo#1", "0b5a3c1e-1f2a-4b3c-8d4e-5f6a7b8c9d0e")
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.True(t, owner.SetPR(PRLink{PR: mustItem(t, "github:octo/repo#5"), Branch: "feature/x", Linked: at}))
	require.True(t, owner.SetPR(PRLink{PR: mustItem(t, "github:octo/lib#9"), Linked: at, Declined: DeclinedSharedWorktree, Closed: true, Fork: true}))
	require.False(t, owner.SetPR(PRLink{PR: mustItem(t, "github:octo/repo#5"), Branch: "feature/y", Linked: at}), "an existing link is replaced")
	require.NoError(t, reg.Put(ctx, owner))
	got, err := reg.Get(owner.Item)
	require.NoError(t, err)
	require.Equal(t, owner, got)
	l, ok := got.PR(mustItem(t, "github:octo/repo#5"))
	require.True(t, ok)
	require.Equal(t, "feature/y", l.Branch)

	ep := testRecord(t, "github:octo/repo#5", "1b5a3c1e-1f2a-4b3c-8d4e-5f6a7b8c9d0e")
	ep.Parent = owner.Item
	require.NoError(t, reg.Put(ctx, ep))
	got, err = reg.Get(ep.Item)
	require.NoError(t, err)
	require.Equal(t, owner.Item, got.Parent)
	data, err := os.ReadFile(filepath.Join(reg.Dir(), ep.Item.Slug()+".json"))
	require.NoError(t, err)
	require.Contains(t, string(data), `"parent": {`)
}

func TestRegistryGetMissing(t *testing.T) {
	reg, err := OpenRegistry(t.TempDir())
	require.NoError(t, err)
	_, err = reg.Get(mustItem(t, "github:o/r#1"))
	require.ErrorIs(t, err, ErrNoRecord)
}

func TestRegistrySlugCollision(t *testing.T) {
	ctx := context.Background()
	reg, err := OpenRegistry(t.TempDir())
	require.NoError(t, err)
	a := testRecord(t, "github:a-b/c#1", "id-a")
	b := testRecord(t, "github:a/b-c#1", "id-b")
	require.NoError(t, reg.Put(ctx, a))
	require.ErrorIs(t, reg.Put(ctx, b), ErrSlugCollision)
	_, err = reg.Get(b.Item)
	require.ErrorIs(t, err, ErrSlugCollision)
	require.ErrorIs(t, reg.Delete(ctx, b.Item), ErrSlugCollision)
	got, err := reg.Get(a.Item)
	require.NoError(t, err)
	require.Equal(t, "id-a", got.SessionID, "the first work item's record must survive")
}

func TestRegistryCorruptRecordIsKeptAside(t *testing.T) {
	ctx := context.Background()
	reg, err := OpenRegistry(t.TempDir())
	require.NoError(t, err)
	rec := testRecord(t, "github:o/r#3", "id-3")
	path := filepath.Join(reg.Dir(), rec.Item.Slug()+".json")
	require.NoError(t, os.WriteFile(path, []byte("{not json"), 0o600))

	_, err = reg.Get(rec.Item)
	require.ErrorIs(t, err, ErrCorruptRecord)
	require.NoError(t, reg.Put(ctx, rec))
	matches, err := filepath.Glob(path + ".corrupt-*")
	require.NoError(t, err)
	require.Len(t, matches, 1)
	data, err := os.ReadFile(matches[0])
	require.NoError(t, err)
	require.Equal(t, "{not json", string(data))
}

func TestRegistryListAndLookupBySessionID(t *testing.T) {
	ctx := context.Background()
	dir := RegistryDir(t.TempDir())
	reg, err := OpenRegistry(dir)
	require.NoError(t, err)
	for i := 1; i <= 5; i++ {
		require.NoError(t, reg.Put(ctx, testRecord(t, fmt.Sprintf("github:o/r#%d", i), fmt.Sprintf("sess-%d", i))))
	}
	// Files that are not records, and a corrupt record, do not disturb
	// lookups of the others.
	require.NoError(t, os.WriteFile(filepath.Join(dir, "notes.txt"), []byte("sess-2"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "github-o-r-99.json"), []byte(`{"harnessSessionId":"sess-2"`), 0o600))

	recs, errs := reg.List()
	require.Len(t, recs, 5)
	require.Len(t, errs, 1)

	got, err := LookupBySessionID(dir, "sess-2")
	require.NoError(t, err)
	require.Equal(t, "github:o/r#2", got.Item.String())
	got, err = reg.BySessionID("sess-5")
	require.NoError(t, err)
	require.Equal(t, 5, got.Item.Number)

	_, err = LookupBySessionID(dir, "sess-404")
	require.ErrorIs(t, err, ErrNoRecord)
	_, err = LookupBySessionID(dir, "../../etc/passwd")
	require.ErrorIs(t, err, ErrInvalidName)
	_, err = LookupBySessionID(filepath.Join(dir, "missing"), "sess-1")
	require.ErrorIs(t, err, ErrNoRecord)
	_, err = os.Stat(filepath.Join(dir, "missing"))
	require.True(t, os.IsNotExist(err), "a lookup must not create the directory")
}

func TestRegistryConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	reg, err := OpenRegistry(t.TempDir())
	require.NoError(t, err)
	rec := testRecord(t, "github:o/r#1", "id-1")
	require.NoError(t, reg.Put(ctx, rec))
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := reg.Update(ctx, rec.Item, func(r *Record, exists bool) error {
				r.Fallbacks = append(r.Fallbacks, Fallback{At: r.Created, PreviousSessionID: "x", Reason: "r"})
				return nil
			})
			require.NoError(t, err)
		}()
	}
	wg.Wait()
	got, err := reg.Get(rec.Item)
	require.NoError(t, err)
	require.Len(t, got.Fallbacks, maxFallbacks, "every update applied, history capped")
}

func TestParseRecordRejects(t *testing.T) {
	good := testRecord(t, "github:o/r#1", "id-1")
	data, err := json.Marshal(good)
	require.NoError(t, err)
	_, err = ParseRecord(data)
	require.NoError(t, err)

	mutate := func(f func(m map[string]any)) []byte {
		var m map[string]any
		require.NoError(t, json.Unmarshal(data, &m))
		f(m)
		out, err := json.Marshal(m)
		require.NoError(t, err)
		return out
	}
	tests := map[string][]byte{
		"bad ref":             mutate(func(m map[string]any) { m["workItem"].(map[string]any)["ref"] = "nope" }),
		"fields disagree":     mutate(func(m map[string]any) { m["workItem"].(map[string]any)["number"] = 2 }),
		"session id as flag":  mutate(func(m map[string]any) { m["harnessSessionId"] = "--dangerously-skip-permissions" }),
		"relative cwd":        mutate(func(m map[string]any) { m["cwd"] = "work" }),
		"foreign tmux target": mutate(func(m map[string]any) { m["tmuxTarget"] = "main" }),
		"other loop target":   mutate(func(m map[string]any) { m["tmuxTarget"] = "loop-github-o-r-2" }),
		"bad status":          mutate(func(m map[string]any) { m["status"] = "zombie" }),
		"bad time":            mutate(func(m map[string]any) { m["createdAt"] = "yesterday" }),
		"harness with slash":  mutate(func(m map[string]any) { m["harness"] = "../claude" }),
		"bad parent":          mutate(func(m map[string]any) { m["parent"] = map[string]any{"ref": "x"} }),
		"own parent":          mutate(func(m map[string]any) { m["parent"] = map[string]any{"ref": "github:o/r#1"} }),
		"bad pr ref": mutate(func(m map[string]any) {
			m["pullRequests"] = []any{map[string]any{"pullRequest": map[string]any{"ref": "#5"}, "linkedAt": "2026-01-01T00:00:00Z"}}
		}),
		"pr branch as flag": mutate(func(m map[string]any) {
			m["pullRequests"] = []any{map[string]any{"pullRequest": map[string]any{"ref": "github:o/r#5"}, "branch": "--upload-pack=x", "linkedAt": "2026-01-01T00:00:00Z"}}
		}),
		"pr unknown decline": mutate(func(m map[string]any) {
			m["pullRequests"] = []any{map[string]any{"pullRequest": map[string]any{"ref": "github:o/r#5"}, "declined": "because", "linkedAt": "2026-01-01T00:00:00Z"}}
		}),
		"not json": []byte("{"),
	}
	for name, in := range tests {
		t.Run(name, func(t *testing.T) {
			_, err := ParseRecord(in)
			require.ErrorIs(t, err, ErrCorruptRecord)
		})
	}

	// A stored name with "." or ":" is read back the way tmux stores it.
	withDots := mutate(func(m map[string]any) {
		m["workItem"].(map[string]any)["ref"] = "github:my.org/r#1"
		m["workItem"].(map[string]any)["owner"] = "my.org"
		m["tmuxTarget"] = "loop-github-my.org-r-1"
	})
	rec, err := ParseRecord(withDots)
	require.NoError(t, err)
	require.Equal(t, "loop-github-my_org-r-1", rec.TmuxName)
}

func FuzzParseRecord(f *testing.F) {
	good, _ := json.Marshal(testRecord(f, "github:o/r#1", "id-1"))
	f.Add(good)
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"workItem":{"ref":"github:o/r#1"},"harness":"claude","harnessSessionId":"x","cwd":"/","status":"active","createdAt":"2026-01-01T00:00:00Z","tmuxTarget":"loop-github-o-r-1","lastDeliveryAt":null,"fallbacks":[{"at":"2026-01-01T00:00:00Z"}]}`))
	f.Add([]byte(`{"workItem":{"ref":"github:o/r#1"},"harness":"claude","harnessSessionId":"x","cwd":"/","status":"active","createdAt":"2026-01-01T00:00:00Z","tmuxTarget":"loop-github-o-r-1","parent":{"ref":"github:o/r#2"},"pullRequests":[{"pullRequest":{"ref":"github:o/r#5"},"branch":"b","linkedAt":"2026-01-01T00:00:00Z","declined":"shared-worktree"}]}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"workItem":null,"fallbacks":"x"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		rec, err := ParseRecord(data)
		if err != nil {
			return
		}
		// Whatever parses is safe to use and survives a write/read cycle.
		if !IsLoopSessionName(rec.TmuxName) || rec.TmuxName != TmuxName(rec.Item) {
			t.Fatalf("accepted tmux name %q", rec.TmuxName)
		}
		if !ValidSessionID(rec.SessionID) || !filepath.IsAbs(rec.Cwd) {
			t.Fatalf("accepted session id %q / cwd %q", rec.SessionID, rec.Cwd)
		}
		out, err := json.Marshal(rec)
		if err != nil {
			t.Fatal(err)
		}
		again, err := ParseRecord(out)
		if err != nil {
			t.Fatalf("re-parse of %s: %v", out, err)
		}
		if again.Item != rec.Item || again.SessionID != rec.SessionID || again.Cwd != rec.Cwd || !again.Created.Equal(rec.Created) {
			t.Fatalf("round trip changed the record: %+v vs %+v", rec, again)
		}
	})
}

// BenchmarkLookupBySessionID is loop-gate's path: find a session among a
// realistic number of records, files only.
func BenchmarkLookupBySessionID(b *testing.B) {
	ctx := context.Background()
	dir := b.TempDir()
	reg, err := OpenRegistry(dir)
	require.NoError(b, err)
	for i := 1; i <= 200; i++ {
		id, _ := NewSessionID()
		if i == 137 {
			id = "0b5a3c1e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"
		}
		require.NoError(b, reg.Put(ctx, testRecord(b, fmt.Sprintf("github:octo/repo#%d", i), id)))
	}
	for b.Loop() {
		if _, err := LookupBySessionID(dir, "0b5a3c1e-1f2a-4b3c-8d4e-5f6a7b8c9d0e"); err != nil {
			b.Fatal(err)
		}
	}
}
