package loop

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
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

// helperEnv selects the role of a re-executed test binary (see
// TestFSHelperProcess).
const helperEnv = "LOOP_FS_TEST_HELPER"

// TestFSHelperProcess is not a test: it is the body of the child processes
// the tests below start by re-executing the test binary. It does nothing
// unless helperEnv is set.
func TestFSHelperProcess(t *testing.T) {
	role := os.Getenv(helperEnv)
	if role == "" {
		return
	}
	ctx := context.Background()
	repo := os.Getenv("LOOP_FS_REPO")
	store := NewStore(repo, DefaultSpecDir)
	out := bufio.NewWriter(os.Stdout)
	say := func(s string) { out.WriteString(s + "\n"); out.Flush() }
	fail := func(err error) { fmt.Fprintln(os.Stderr, err); os.Exit(3) }
	switch role {
	case "lock-hold":
		unlock, err := store.Lock(ctx, "issue-1", 10*time.Second)
		if err != nil {
			fail(err)
		}
		say("locked")
		_, _ = io.Copy(io.Discard, os.Stdin) // hold until the parent closes stdin
		unlock()
	case "save-loop":
		// Save crashState(i) for i = start, start+1, ... and report each
		// i once Save has returned, until killed.
		id := os.Getenv("LOOP_FS_ID")
		i, _ := strconv.Atoi(os.Getenv("LOOP_FS_START"))
		for ; ; i++ {
			if err := store.Save(ctx, id, crashState(id, i)); err != nil {
				fail(err)
			}
			say(strconv.Itoa(i))
		}
	case "count":
		n, _ := strconv.Atoi(os.Getenv("LOOP_FS_N"))
		for range n {
			if err := increment(ctx, store, "issue-1"); err != nil {
				fail(err)
			}
		}
	case "emit":
		n, _ := strconv.Atoi(os.Getenv("LOOP_FS_N"))
		maxBytes, _ := strconv.ParseInt(os.Getenv("LOOP_FS_MAXBYTES"), 10, 64)
		l, err := OpenEventLog(os.Getenv("LOOP_FS_LOG"), "child", EventLogOptions{MaxBytes: maxBytes, MaxBackups: 10000, Warnings: os.Stderr})
		if err != nil {
			fail(err)
		}
		me := os.Getenv("LOOP_FS_NAME")
		for i := range n {
			l.Emit(graph.LogEvent{Name: "test.seq", Fields: []graph.Field{{Key: "writer", Value: me}, {Key: "seq", Value: i}, {Key: "pad", Value: strings.Repeat("x", i%50)}}})
		}
		l.Close()
	default:
		fail(fmt.Errorf("unknown helper role %q", role))
	}
	os.Exit(0)
}

// helper returns a command re-running this test binary as a child in role.
func helper(t *testing.T, role string, env ...string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestFSHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), append([]string{helperEnv + "=" + role}, env...)...)
	cmd.Stderr = os.Stderr
	return cmd
}

// increment adds one to the "counter" node's attempts under the lock.
func increment(ctx context.Context, s *FileStore, id string) error {
	unlock, err := s.Lock(ctx, id, time.Minute)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := s.Load(ctx, id)
	if errors.Is(err, graph.ErrNoState) {
		st, err = graph.NewState(id), nil
	}
	if err != nil {
		return err
	}
	rec := st.Record("counter")
	rec.Attempts++
	st.Nodes.Set("counter", rec)
	return s.Save(ctx, id, st)
}

// crashState is the i-th state the save-loop child writes: a few
// kilobytes, so that a kill often lands in the middle of a write.
func crashState(id string, i int) *graph.State {
	st := graph.NewState(id)
	st.CurrentNode = "node-" + strconv.Itoa(i)
	st.Nodes.Set("design", graph.NodeRecord{Attempts: i, Outcome: "approved", LastBlock: strings.Repeat("é", 500+i%700)})
	st.Loop = "pdlc-work-item-loop"
	return st
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

func sampleState() *graph.State {
	st := graph.NewState("issue-7")
	st.CurrentNode = "design"
	st.Nodes.Set("requirements", graph.NodeRecord{Attempts: 1, Outcome: "approved", EnteredAt: "2026-01-02T03:04:05+00:00"})
	st.Nodes.Set("design", graph.NodeRecord{Attempts: 2, LastBlock: "missing <design.md> & ünïcode"})
	st.Decisions.Set("requirements", graph.Decision{At: "2026-01-02T03:04:05+00:00", Outcome: "approved", By: "@dana"})
	st.Loop = "pdlc-work-item-loop"
	return st
}

func TestStoreRoundTrip(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs")
	want := sampleState()
	require.NoError(t, s.Save(ctx, "issue-7", want))

	path := filepath.Join(repo, "docs", "specs", "issue-7", "graph-state.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	marshalled, err := graph.MarshalState(want)
	require.NoError(t, err)
	assert.Equal(t, string(marshalled), string(data), "the file is graph.MarshalState's pretty form")
	assert.Equal(t, []string{"graph-state.json"}, dirNames(t, filepath.Dir(path)), "no temp file is left behind")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())

	got, err := s.Load(ctx, "issue-7")
	require.NoError(t, err)
	assert.Equal(t, want, got)

	// Saving again replaces the file.
	want.CurrentNode = "tasks"
	require.NoError(t, s.Save(ctx, "issue-7", want))
	got, err = s.Load(ctx, "issue-7")
	require.NoError(t, err)
	assert.Equal(t, "tasks", got.CurrentNode)
}

// A provisional save writes the same file the same way (its only
// difference, the directory's fsync, is not observable short of a power
// cut): full content, mode 0644, no temp file left, and Load reads it.
func TestStoreSaveProvisionalReplacesTheStateWhole(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs")
	want := sampleState()
	require.NoError(t, s.Save(ctx, "issue-7", want))
	want.CurrentNode = "tasks"
	require.NoError(t, s.SaveProvisional(ctx, "issue-7", want))
	path := filepath.Join(repo, "docs", "specs", "issue-7", "graph-state.json")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	marshalled, err := graph.MarshalState(want)
	require.NoError(t, err)
	assert.Equal(t, string(marshalled), string(data))
	assert.Equal(t, []string{"graph-state.json"}, dirNames(t, filepath.Dir(path)), "no temp file is left behind")
	info, err := os.Stat(path)
	require.NoError(t, err)
	assert.Equal(t, os.FileMode(0o644), info.Mode().Perm())
	got, err := s.Load(ctx, "issue-7")
	require.NoError(t, err)
	assert.Equal(t, want, got)
}

func TestStoreLoadMissing(t *testing.T) {
	repo := t.TempDir()
	s := NewStore(repo, "")
	_, err := s.Load(context.Background(), "issue-9")
	require.ErrorIs(t, err, graph.ErrNoState)
	assert.Contains(t, err.Error(), filepath.Join("docs", "specs", "issue-9", "graph-state.json"))
	assert.Empty(t, dirNames(t, repo), "Load creates nothing")
}

func TestStoreCorruptStateIsPreserved(t *testing.T) {
	cases := []struct {
		name string
		raw  []byte
	}{
		{"garbage", []byte("not json at all")},
		{"truncated", []byte(`{"version": 1, "workItem": "issue-3", "curr`)},
		{"array", []byte(`[1, 2, 3]`)},
		{"empty", []byte{}},
		{"binary", []byte{0xff, 0x00, 0xfe, '{'}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			repo := t.TempDir()
			clock := graphtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := NewStore(repo, "docs/specs", WithStoreClock(clock))
			dir := filepath.Join(repo, "docs", "specs", "issue-3")
			require.NoError(t, os.MkdirAll(dir, 0o755))
			path := filepath.Join(dir, StateFileName)
			require.NoError(t, os.WriteFile(path, tc.raw, 0o644))

			_, err := s.Load(ctx, "issue-3")
			require.ErrorIs(t, err, graph.ErrCorruptState)
			assert.Equal(t, []string{StateFileName}, dirNames(t, dir), "Load modifies nothing")

			require.NoError(t, s.Save(ctx, "issue-3", graph.NewState("issue-3")))
			corrupt := filepath.Join(dir, "graph-state.json.corrupt-20260102T030405Z")
			kept, err := os.ReadFile(corrupt)
			require.NoError(t, err)
			assert.Equal(t, tc.raw, kept, "the unparseable bytes are kept verbatim")
			_, err = s.Load(ctx, "issue-3")
			require.NoError(t, err, "the new state replaced the corrupt one")

			// A second corruption in the same second never overwrites the
			// first copy.
			second := append([]byte("second: "), tc.raw...)
			require.NoError(t, os.WriteFile(path, second, 0o644))
			require.NoError(t, s.Save(ctx, "issue-3", graph.NewState("issue-3")))
			kept, err = os.ReadFile(corrupt)
			require.NoError(t, err)
			assert.Equal(t, tc.raw, kept)
			kept2, err := os.ReadFile(corrupt + ".1")
			require.NoError(t, err)
			assert.Equal(t, second, kept2)

			// A parseable state is replaced without a copy.
			require.NoError(t, s.Save(ctx, "issue-3", graph.NewState("issue-3")))
			assert.Len(t, dirNames(t, dir), 3)
		})
	}
}

func TestStoreSaveRefusesWhenCorruptCannotBePreserved(t *testing.T) {
	// A directory where the state file belongs cannot be linked or copied:
	// Save must fail and leave it alone rather than replace it.
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs")
	path := filepath.Join(repo, "docs", "specs", "issue-4", StateFileName)
	require.NoError(t, os.MkdirAll(path, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(path, "inner"), []byte("x"), 0o644))

	_, err := s.Load(ctx, "issue-4")
	require.ErrorIs(t, err, graph.ErrCorruptState)
	err = s.Save(ctx, "issue-4", graph.NewState("issue-4"))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "move it aside by hand")
	_, err = os.Stat(filepath.Join(path, "inner"))
	require.NoError(t, err)
	assert.Equal(t, []string{StateFileName}, dirNames(t, filepath.Dir(path)), "no temp file is left behind")
}

func TestStoreRejectsUnsafeIDs(t *testing.T) {
	ids := []string{"", ".", "..", "a/b", "../issue-1", "/etc", `a\b`, "issue\x00-1", "issue-1/",
		// Whitespace, trailing spaces and line ends (issue 9, item 6).
		" ", "   ", "\t", "\n", "issue-1 ", " issue-1", "issue-1\n", "issue-1\r\n", "issue 1", "issue-1\u00a0", "issue-1\x1b", "issue-\xff", "issue\u200b-1", "\ufeffissue-1"}
	ctx := context.Background()
	for _, id := range ids {
		t.Run(strconv.Quote(id), func(t *testing.T) {
			repo := t.TempDir()
			s := NewStore(repo, "docs/specs")
			_, err := s.Load(ctx, id)
			assert.ErrorIs(t, err, ErrInvalidID)
			assert.ErrorIs(t, s.Save(ctx, id, graph.NewState("x")), ErrInvalidID)
			_, err = s.Lock(ctx, id, time.Second)
			assert.ErrorIs(t, err, ErrInvalidID)
			_, err = s.StatePath(id)
			assert.ErrorIs(t, err, ErrInvalidID)
			assert.Empty(t, dirNames(t, repo), "nothing is created for a refused id")
		})
	}
	for _, id := range []string{"issue-1", "adhoc-2026-01-02", ".hidden", "a..b"} {
		assert.NoError(t, ValidateWorkItemID(id), id)
	}
}

func TestStoreRejectsUnsafeSpecRoot(t *testing.T) {
	ctx := context.Background()
	for _, root := range []string{"/abs/specs", "..", "../elsewhere", "docs/../../x", ".", "docs/.."} {
		t.Run(root, func(t *testing.T) {
			repo := t.TempDir()
			s := NewStore(repo, root)
			_, err := s.Load(ctx, "issue-1")
			assert.ErrorIs(t, err, ErrUnsafePath)
			assert.ErrorIs(t, s.Save(ctx, "issue-1", graph.NewState("issue-1")), ErrUnsafePath)
			_, err = s.Lock(ctx, "issue-1", time.Second)
			assert.ErrorIs(t, err, ErrUnsafePath)
			assert.Empty(t, dirNames(t, repo))
		})
	}
	s := NewStore("/r", "./docs//specs/")
	p, err := s.StatePath("issue-1")
	require.NoError(t, err)
	assert.Equal(t, filepath.FromSlash("/r/docs/specs/issue-1/graph-state.json"), p)
}

func TestPRLoopSubPath(t *testing.T) {
	cases := []struct {
		prRepo, origin string
		pr             int
		want           string
		err            bool
	}{
		{"", "octo/app", 7, "pr-loops/pr-7", false},
		{"octo/app", "octo/app", 7, "pr-loops/pr-7", false},
		{"Octo/App", "octo/app", 7, "pr-loops/pr-7", false},
		{"octo/lib", "octo/app", 12, "pr-loops/octo__lib/pr-12", false},
		{"ghe.example.com/octo/lib", "octo/app", 3, "pr-loops/ghe.example.com__octo__lib/pr-3", false},
		{"octo", "octo/app", 3, "", true},
		{"octo/..", "octo/app", 3, "", true},
		{"octo/a b", "octo/app", 3, "", true},
		{"octo/lib", "octo/app", 0, "", true},
	}
	for _, tc := range cases {
		got, err := PRLoopSubPath(tc.prRepo, tc.origin, tc.pr)
		if tc.err {
			assert.ErrorIs(t, err, ErrUnsafePath, "%+v", tc)
			continue
		}
		require.NoError(t, err, "%+v", tc)
		assert.Equal(t, tc.want, got)
	}

	ctx := context.Background()
	repo := t.TempDir()
	sub, err := PRLoopSubPath("octo/lib", "octo/app", 12)
	require.NoError(t, err)
	inner := NewStore(repo, "docs/specs", WithStateSubPath(sub))
	require.NoError(t, inner.Save(ctx, "issue-5", graph.NewState("issue-5")))
	_, err = os.Stat(filepath.Join(repo, "docs/specs/issue-5/pr-loops/octo__lib/pr-12/graph-state.json"))
	require.NoError(t, err)
	_, err = NewStore(repo, "docs/specs").Load(ctx, "issue-5")
	assert.ErrorIs(t, err, graph.ErrNoState, "the outer loop's state is separate")

	for _, bad := range []string{"../x", "/abs", "pr-loops/../..", "a//b", "a/./b"} {
		_, err := NewStore(repo, "docs/specs", WithStateSubPath(bad)).Load(ctx, "issue-5")
		assert.ErrorIs(t, err, ErrUnsafePath, bad)
	}
}

func TestStoreLockExcludesGoroutines(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs", WithLockPoll(5*time.Millisecond))
	unlock, err := s.Lock(ctx, "issue-1", time.Second)
	require.NoError(t, err)
	lockPath, _ := s.LockPath("issue-1")
	_, err = os.Stat(lockPath)
	require.NoError(t, err, "Lock creates the directory and the lock file")

	_, err = s.Lock(ctx, "issue-1", 20*time.Millisecond)
	require.ErrorIs(t, err, graph.ErrBusy)
	assert.Contains(t, err.Error(), lockPath)
	assert.Contains(t, err.Error(), "wait for it or check for a stuck process")

	// Another work item is not affected.
	unlock2, err := s.Lock(ctx, "issue-2", 0)
	require.NoError(t, err)
	unlock2()

	// A waiter gets the lock once it is released.
	got := make(chan error, 1)
	go func() {
		u, err := s.Lock(ctx, "issue-1", time.Minute)
		if err == nil {
			u()
		}
		got <- err
	}()
	unlock()
	require.NoError(t, <-got)

	// unlock is idempotent: a second call must not release a lock taken
	// since by someone else.
	unlock()
	held, err := s.Lock(ctx, "issue-1", time.Second)
	require.NoError(t, err)
	unlock()
	_, err = s.Lock(ctx, "issue-1", 0)
	require.ErrorIs(t, err, graph.ErrBusy)
	held()
}

func TestStoreLockHonoursContext(t *testing.T) {
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs")
	unlock, err := s.Lock(context.Background(), "issue-1", time.Second)
	require.NoError(t, err)
	defer unlock()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = s.Lock(ctx, "issue-1", time.Hour)
	require.ErrorIs(t, err, context.Canceled)
}

func TestStoreLockExcludesProcesses(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs")

	for _, release := range []string{"unlock", "sigkill"} {
		t.Run(release, func(t *testing.T) {
			child := helper(t, "lock-hold", "LOOP_FS_REPO="+repo)
			stdin, err := child.StdinPipe()
			require.NoError(t, err)
			stdout, err := child.StdoutPipe()
			require.NoError(t, err)
			require.NoError(t, child.Start())
			line, err := bufio.NewReader(stdout).ReadString('\n')
			require.NoError(t, err)
			require.Equal(t, "locked\n", line)

			_, err = s.Lock(ctx, "issue-1", 30*time.Millisecond)
			require.ErrorIs(t, err, graph.ErrBusy, "the child process holds the lock")

			if release == "unlock" {
				stdin.Close()
			} else {
				require.NoError(t, child.Process.Kill())
			}
			_ = child.Wait()
			unlock, err := s.Lock(ctx, "issue-1", time.Minute)
			require.NoError(t, err, "the lock is free once the child released it or died")
			unlock()
		})
	}
}

func TestStoreConcurrentUpdatesAreNotLost(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs", WithLockPoll(time.Millisecond))
	const workers = 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- increment(ctx, s, "issue-1")
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	st, err := s.Load(ctx, "issue-1")
	require.NoError(t, err)
	assert.Equal(t, workers, st.Record("counter").Attempts)
}

func TestStoreConcurrentUpdatesAcrossProcesses(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs", WithLockPoll(time.Millisecond))
	const procs, perProc, goroutines = 3, 20, 10
	var children []*exec.Cmd
	for range procs {
		c := helper(t, "count", "LOOP_FS_REPO="+repo, "LOOP_FS_N="+strconv.Itoa(perProc))
		require.NoError(t, c.Start())
		children = append(children, c)
	}
	var wg sync.WaitGroup
	errs := make(chan error, goroutines)
	for range goroutines {
		wg.Add(1)
		go func() { defer wg.Done(); errs <- increment(ctx, s, "issue-1") }()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for _, c := range children {
		require.NoError(t, c.Wait())
	}
	st, err := s.Load(ctx, "issue-1")
	require.NoError(t, err)
	assert.Equal(t, procs*perProc+goroutines, st.Record("counter").Attempts)
}

// TestStoreSurvivesSIGKILL kills child processes that save in a tight loop
// at random moments (0–5 ms after their first save). After every kill the
// state file must parse, be exactly one of the states the child wrote, and
// be no older than the last save the child reported complete. Now and then
// the file is corrupted before a child starts: its bytes must then be found
// preserved beside it. Kills run in eight lanes (one work item each) at
// once, so that process start-up on a loaded machine does not dominate.
func TestStoreSurvivesSIGKILL(t *testing.T) {
	kills, lanes := 200, 8
	if testing.Short() {
		kills = 40
	}
	repo := t.TempDir()
	start := time.Now()
	type laneResult struct {
		corrupted, temps int
		err              error
	}
	results := make(chan laneResult, lanes)
	for lane := range lanes {
		go func() {
			var res laneResult
			res.corrupted, res.temps, res.err = crashLane(repo, "issue-"+strconv.Itoa(lane+1), kills/lanes, int64(lane))
			results <- res
		}()
	}
	var corrupted, temps int
	for range lanes {
		res := <-results
		require.NoError(t, res.err)
		corrupted += res.corrupted
		temps += res.temps
	}
	t.Logf("%d kills in %v; %d corrupt files preserved; %d temp files left by kills mid-save", kills, time.Since(start).Round(time.Millisecond), corrupted, temps)
}

// crashLane runs one lane of TestStoreSurvivesSIGKILL on work item id.
func crashLane(repo, id string, kills int, seed int64) (corrupted, temps int, err error) {
	ctx := context.Background()
	s := NewStore(repo, "docs/specs")
	dir := filepath.Join(repo, "docs", "specs", id)
	path := filepath.Join(dir, StateFileName)
	rng := rand.New(rand.NewPCG(uint64(seed), uint64(time.Now().UnixNano())))
	next := 0
	for k := range kills {
		var garbage []byte
		if k%25 == 10 {
			garbage = []byte(fmt.Sprintf(`{"torn": %d, "by": "a crash"`, k))
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return 0, 0, err
			}
			if err := os.WriteFile(path, garbage, 0o644); err != nil {
				return 0, 0, err
			}
			corrupted++
		}
		cmd := exec.Command(os.Args[0], "-test.run=^TestFSHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"=save-loop", "LOOP_FS_REPO="+repo, "LOOP_FS_ID="+id, "LOOP_FS_START="+strconv.Itoa(next))
		cmd.Stderr = os.Stderr
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return 0, 0, err
		}
		if err := cmd.Start(); err != nil {
			return 0, 0, err
		}
		r := bufio.NewReader(stdout)
		first, err := r.ReadString('\n')
		if err != nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
			return 0, 0, fmt.Errorf("%s kill %d: the child did not save: %v", id, k, err)
		}
		time.Sleep(time.Duration(rng.IntN(5001)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil {
			return 0, 0, err
		}
		confirmed, _ := strconv.Atoi(strings.TrimSpace(first))
		rest, _ := io.ReadAll(r)
		for _, l := range strings.Fields(string(rest)) {
			confirmed, _ = strconv.Atoi(l)
		}
		_ = cmd.Wait()

		st, err := s.Load(ctx, id)
		if err != nil {
			return 0, 0, fmt.Errorf("%s kill %d: the state does not load: %w", id, k, err)
		}
		n, err := strconv.Atoi(strings.TrimPrefix(st.CurrentNode, "node-"))
		if err != nil {
			return 0, 0, fmt.Errorf("%s kill %d: unexpected current node %q", id, k, st.CurrentNode)
		}
		if n < confirmed || n > confirmed+1 {
			return 0, 0, fmt.Errorf("%s kill %d: state %d on disk, but the child had completed %d (lost or invented)", id, k, n, confirmed)
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return 0, 0, err
		}
		want, _ := graph.MarshalState(crashState(id, n))
		if !bytes.Equal(want, data) {
			return 0, 0, fmt.Errorf("%s kill %d: the file is not exactly state %d", id, k, n)
		}
		if garbage != nil && !corruptCopyHolds(dir, garbage) {
			return 0, 0, fmt.Errorf("%s kill %d: the corrupt bytes %q were not preserved", id, k, garbage)
		}
		next = n + 1
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return 0, 0, err
	}
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			temps++
		}
	}
	return corrupted, temps, nil
}

func corruptCopyHolds(dir string, want []byte) bool {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), StateFileName+corruptInfix) {
			if data, err := os.ReadFile(filepath.Join(dir, e.Name())); err == nil && bytes.Equal(data, want) {
				return true
			}
		}
	}
	return false
}

func TestStoreSaveRemovesStaleTempFiles(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs")
	dir := filepath.Join(repo, "docs", "specs", "issue-1")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	stale := filepath.Join(dir, ".graph-state.json.tmp-111")
	fresh := filepath.Join(dir, ".graph-state.json.tmp-222")
	for _, p := range []string{stale, fresh} {
		require.NoError(t, os.WriteFile(p, []byte("{"), 0o600))
	}
	old := time.Now().Add(-time.Hour)
	require.NoError(t, os.Chtimes(stale, old, old))

	require.NoError(t, s.Save(ctx, "issue-1", graph.NewState("issue-1")))
	assert.Equal(t, []string{".graph-state.json.tmp-222", StateFileName}, dirNames(t, dir),
		"a temp file left by a killed Save is removed; a recent one may be another Save's and stays")
}

func TestStoreRefusesSymlinkedSpecDirs(t *testing.T) {
	ctx := context.Background()
	outside := t.TempDir()
	for _, link := range []string{"docs", "docs/specs", "docs/specs/issue-1"} {
		t.Run(link, func(t *testing.T) {
			repo := t.TempDir()
			p := filepath.Join(repo, filepath.FromSlash(link))
			require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
			require.NoError(t, os.Symlink(outside, p))
			s := NewStore(repo, "docs/specs")
			err := s.Save(ctx, "issue-1", graph.NewState("issue-1"))
			require.ErrorIs(t, err, ErrUnsafePath)
			assert.Contains(t, err.Error(), "is a symbolic link")
			_, err = s.Lock(ctx, "issue-1", time.Second)
			require.ErrorIs(t, err, ErrUnsafePath)
			assert.Empty(t, dirNames(t, outside), "nothing is written through the link")
		})
	}
	// A symbolic link at the lock file is not followed.
	repo := t.TempDir()
	dir := filepath.Join(repo, "docs", "specs", "issue-1")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	require.NoError(t, os.Symlink(filepath.Join(outside, "x"), filepath.Join(dir, LockFileName)))
	_, err := NewStore(repo, "docs/specs").Lock(ctx, "issue-1", time.Second)
	require.Error(t, err)
	assert.Empty(t, dirNames(t, outside))
}

// TestStoreOversizedStateIsCorrupt: a graph-state.json over MaxStateBytes is
// refused from its size, before it is read (the 1 GB file is sparse: reading
// it would cost a gigabyte), reported as unparseable with its size and the
// cap, and preserved by Save like any corrupt state.
func TestStoreOversizedStateIsCorrupt(t *testing.T) {
	cases := []struct {
		name string
		size int64
	}{
		{"one byte over", MaxStateBytes + 1},
		{"1 GB", 1 << 30},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			repo := t.TempDir()
			clock := graphtest.NewClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
			s := NewStore(repo, "docs/specs", WithStoreClock(clock))
			require.NoError(t, s.Save(ctx, "issue-5", sampleState()))
			path, err := s.StatePath("issue-5")
			require.NoError(t, err)
			require.NoError(t, os.Truncate(path, tc.size))

			_, err = s.Load(ctx, "issue-5")
			require.ErrorIs(t, err, graph.ErrCorruptState)
			require.ErrorIs(t, err, ErrTooLarge)
			assert.Contains(t, err.Error(), path)
			assert.Contains(t, err.Error(), fmt.Sprintf("is %d bytes, more than the %d", tc.size, MaxStateBytes))

			require.NoError(t, s.Save(ctx, "issue-5", graph.NewState("issue-5")))
			fi, err := os.Stat(path + ".corrupt-20260102T030405Z")
			require.NoError(t, err, "the oversized file is preserved beside the new state")
			assert.Equal(t, tc.size, fi.Size())
			_, err = s.Load(ctx, "issue-5")
			require.NoError(t, err)
		})
	}
}

// TestStoreStateAtTheCapParses: the cap refuses only what is over it.
func TestStoreStateAtTheCapParses(t *testing.T) {
	ctx := context.Background()
	repo := t.TempDir()
	s := NewStore(repo, "docs/specs")
	require.NoError(t, s.Save(ctx, "issue-6", sampleState()))
	path, err := s.StatePath("issue-6")
	require.NoError(t, err)
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	padded := append(data, bytes.Repeat([]byte(" "), MaxStateBytes-len(data))...)
	require.NoError(t, os.WriteFile(path, padded, 0o644))
	got, err := s.Load(ctx, "issue-6")
	require.NoError(t, err)
	assert.Equal(t, sampleState().CurrentNode, got.CurrentNode)
}

// TestCopyExclusiveStreams: the copy fallback of preserveCorrupt (for
// filesystems without hard links) copies an oversized file without reading
// it into memory, and never replaces an existing name.
func TestCopyExclusiveStreams(t *testing.T) {
	dir := t.TempDir()
	src := filepath.Join(dir, "src")
	content := bytes.Repeat([]byte("0123456789"), 100_000)
	require.NoError(t, os.WriteFile(src, content, 0o644))
	dst := filepath.Join(dir, "dst")
	require.NoError(t, copyExclusive(dst, src))
	got, err := os.ReadFile(dst)
	require.NoError(t, err)
	assert.Equal(t, content, got)
	require.ErrorIs(t, copyExclusive(dst, src), os.ErrExist)
}

// BenchmarkLoadOversizedState reports the peak heap of loading a sparse
// 1 GB graph-state.json (before the cap: 4.3 GB and 40 s in check).
func BenchmarkLoadOversizedState(b *testing.B) {
	ctx := context.Background()
	repo := b.TempDir()
	s := NewStore(repo, "docs/specs")
	require.NoError(b, s.Save(ctx, "issue-5", sampleState()))
	path, err := s.StatePath("issue-5")
	require.NoError(b, err)
	require.NoError(b, os.Truncate(path, 1<<30))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.Load(ctx, "issue-5"); !errors.Is(err, ErrTooLarge) {
			b.Fatalf("Load of a 1 GB state: %v, want ErrTooLarge", err)
		}
	}
}
