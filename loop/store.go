package loop

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/internal/lazyre"
)

// File names inside a work item's spec directory (docs/graph.md §1).
const (
	StateFileName = "graph-state.json"
	LockFileName  = "graph-state.lock"
	// corruptInfix joins the state file name and the UTC timestamp of a
	// preserved unparseable copy: graph-state.json.corrupt-20260102T030405Z.
	corruptInfix = ".corrupt-"
	// corruptStamp formats the timestamp in a corrupt copy's name.
	corruptStamp = "20060102T150405Z"
)

// MaxStateBytes bounds the graph-state.json theloop reads. The file sits in
// the checkout, where the agent writes, and parsing it is the first thing
// `check --recompute`, loop-gate and loopd do: uncapped, a 1 GB file cost
// check 40 s and 4.3 GB of memory (a CI runner died) and loop-gate 2.1 GB.
// Real state is a few kilobytes — a pointer, decisions, a bounded history —
// so 8 MB is generous by three orders of magnitude. A larger file is
// treated as unparseable (docs/decisions.md §5): recompute reconstructs
// the state from the artifacts, and Save preserves the file beside it as
// graph-state.json.corrupt-<ts> before replacing it.
const MaxStateBytes = hooks.MaxInnerStateBytes

// DefaultLockPoll is how often Lock retries a held lock.
const DefaultLockPoll = 25 * time.Millisecond

// FileStore is the filesystem graph.Store: a work item's state lives in
// <repo>/<specRoot>[/<id>]/<subPath>/graph-state.json, its lock in
// graph-state.lock beside it.
//
// Contracts:
//   - Ids are validated before the filesystem is touched; an id with a path
//     separator, NUL, "." or ".." is refused with ErrInvalidID, never
//     sanitised.
//   - Load never writes anything.
//   - Save is atomic (temp file in the same directory, fsync, rename,
//     fsync of the directory): a reader, or a process started after a
//     crash, sees the old file or the new one, never a torn one. An
//     unparseable file about to be replaced is first preserved beside it.
//   - Save and Lock refuse (ErrUnsafePath) to go through a symbolic link
//     between the repository root and the state directory.
//   - Lock is an exclusive flock(2) that excludes other processes and other
//     goroutines of this process alike. Save does not take it: callers that
//     read-modify-write hold it around the whole sequence (it is not
//     re-entrant).
//
// A FileStore built with an unsafe spec root or sub-path refuses every call
// with the construction error (fail closed). It is safe for concurrent use.
type FileStore struct {
	repoRoot string
	specRoot string
	subPath  string
	clock    graph.Clock
	poll     time.Duration
	err      error
	scrub    func(any) any
}

// StoreOption configures a FileStore.
type StoreOption func(*FileStore)

// WithStoreClock sets the clock that names preserved corrupt copies
// (default: the wall clock).
func WithStoreClock(c graph.Clock) StoreOption {
	return func(s *FileStore) {
		if c != nil {
			s.clock = c
		}
	}
}

// WithStoreScrub cleans what Save writes with scrub (scrub.Scrubber.Value
// semantics: strings inside maps and lists are cleaned, nothing else
// changes). A state with nothing to clean is written byte for byte as
// graph.MarshalState makes it.
func WithStoreScrub(scrub func(any) any) StoreOption {
	return func(s *FileStore) { s.scrub = scrub }
}

// WithLockPoll sets the interval between lock attempts (default
// DefaultLockPoll). Non-positive values keep the default.
func WithLockPoll(d time.Duration) StoreOption {
	return func(s *FileStore) {
		if d > 0 {
			s.poll = d
		}
	}
}

// WithStateSubPath stores state in a sub-directory of each work item's spec
// directory — an inner (PR) loop's "pr-loops/pr-<n>" or
// "pr-loops/<owner>__<repo>/pr-<n>" (build it with PRLoopSubPath). The
// sub-path must be relative, made of [A-Za-z0-9._-] segments, none of them
// "." or "..".
func WithStateSubPath(sub string) StoreOption {
	return func(s *FileStore) {
		if err := validateSubPath(sub); err != nil {
			s.err = err
			return
		}
		s.subPath = filepath.FromSlash(sub)
	}
}

// NewStore returns the store of the repository checked out at repoRoot,
// whose work items live under specRoot (relative to repoRoot, e.g.
// "docs/specs"; "" means DefaultSpecDir). An absolute or escaping specRoot
// makes every call fail with ErrUnsafePath.
func NewStore(repoRoot, specRoot string, opts ...StoreOption) *FileStore {
	s := &FileStore{repoRoot: repoRoot, clock: graph.SystemClock{}, poll: DefaultLockPoll}
	if specRoot == "" {
		specRoot = DefaultSpecDir
	}
	clean, err := cleanRelativeDir("specRoot", specRoot)
	if err != nil {
		s.err = err
	}
	s.specRoot = clean
	for _, o := range opts {
		o(s)
	}
	return s
}

// validID reports why id cannot name a work item directory, or nil.
func validID(id string) error {
	switch {
	case id == "":
		return fmt.Errorf("%w: the id is empty", ErrInvalidID)
	case id == "." || id == "..":
		return fmt.Errorf("%w: %q is not a directory name", ErrInvalidID, id)
	case strings.ContainsAny(id, "/\\\x00"):
		return fmt.Errorf("%w: %q contains a path separator or NUL; a work item id is one directory name such as issue-109", ErrInvalidID, id)
	case strings.IndexFunc(id, func(r rune) bool { return unicode.IsSpace(r) || unicode.IsControl(r) || unicode.Is(unicode.Cf, r) }) >= 0:
		// A trailing space or newline (a pasted id, an environment
		// variable read with its line end) would otherwise name a second,
		// invisible directory beside the real one.
		return fmt.Errorf("%w: %q contains whitespace, a control character or an invisible formatting character; a work item id is one directory name such as issue-109", ErrInvalidID, id)
	case !utf8.ValidString(id):
		return fmt.Errorf("%w: %q is not valid UTF-8", ErrInvalidID, id)
	}
	return nil
}

// ValidateWorkItemID checks that id can name a work item's spec directory:
// non-empty valid UTF-8, not "." or "..", and free of "/", "\", NUL,
// whitespace, control and invisible formatting characters. The error wraps
// ErrInvalidID.
func ValidateWorkItemID(id string) error { return validID(id) }

// dir returns the directory holding id's state and lock.
func (s *FileStore) dir(id string) (string, error) {
	if s.err != nil {
		return "", s.err
	}
	if err := validID(id); err != nil {
		return "", err
	}
	return filepath.Join(s.repoRoot, s.specRoot, id, s.subPath), nil
}

// StatePath returns the path of id's graph-state.json.
func (s *FileStore) StatePath(id string) (string, error) {
	d, err := s.dir(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, StateFileName), nil
}

// LockPath returns the path of id's graph-state.lock.
func (s *FileStore) LockPath(id string) (string, error) {
	d, err := s.dir(id)
	if err != nil {
		return "", err
	}
	return filepath.Join(d, LockFileName), nil
}

// Load implements graph.Store. A missing file yields an error wrapping
// graph.ErrNoState; a file that cannot be read, is larger than
// MaxStateBytes (also wrapping ErrTooLarge, never read into memory), or
// whose bytes are not a JSON object, one wrapping graph.ErrCorruptState
// (the file is left as it is — Save preserves it). Load modifies nothing.
func (s *FileStore) Load(ctx context.Context, id string) (*graph.State, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path, err := s.StatePath(id)
	if err != nil {
		return nil, err
	}
	data, err := readCapped(path, MaxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%s: %w", path, graph.ErrNoState)
	}
	if errors.Is(err, ErrTooLarge) {
		return nil, fmt.Errorf("%w: %w", graph.ErrCorruptState, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s: %w: %w", path, graph.ErrCorruptState, err)
	}
	st, err := graph.ParseState(id, data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return st, nil
}

// Save implements graph.Store: it writes st (graph.MarshalState) atomically
// to id's state file, creating the spec directory (0755) when missing. When
// the file it replaces does not parse, its bytes are first preserved as
// graph-state.json.corrupt-<UTC timestamp> beside it (a numeric suffix is
// added rather than overwrite an earlier copy); if they cannot be preserved
// Save fails and leaves the file alone. Save does not take the lock.
func (s *FileStore) Save(ctx context.Context, id string, st *graph.State) error {
	return s.save(ctx, id, st, atomicfile.Write)
}

// SaveProvisional is Save without the directory's fsync (graph's
// ProvisionalStore): the file's content is synced before the rename, so a
// power loss leaves the new state or the one it replaced, never a torn
// file. The runtime uses it for the states it can afford to lose.
func (s *FileStore) SaveProvisional(ctx context.Context, id string, st *graph.State) error {
	return s.save(ctx, id, st, atomicfile.WriteKeepPrevious)
}

var _ graph.ProvisionalStore = (*FileStore)(nil)

func (s *FileStore) save(ctx context.Context, id string, st *graph.State, write func(string, []byte, fs.FileMode) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if st == nil {
		return fmt.Errorf("saving the state of %s: nil state", id)
	}
	dir, err := s.dir(id)
	if err != nil {
		return err
	}
	data, err := graph.MarshalState(st)
	if err != nil {
		return fmt.Errorf("encoding the state of %s: %w", id, err)
	}
	if s.scrub != nil {
		if data, err = scrubState(id, data, s.scrub); err != nil {
			return fmt.Errorf("encoding the state of %s: %w", id, err)
		}
	}
	if err := s.prepareDir(id, dir); err != nil {
		return err
	}
	path := filepath.Join(dir, StateFileName)
	if err := s.preserveCorrupt(id, path); err != nil {
		return err
	}
	if err := write(path, data, 0o644); err != nil {
		return err
	}
	removeTemps(dir, staleTempAge)
	return nil
}

// scrubState cleans an encoded state. Most states hold no credential: the
// whole text is checked first, and only a state that changes is decoded,
// cleaned value by value (a structural edit: a secret never breaks the
// JSON around it), read back as a state and encoded as MarshalState does.
func scrubState(id string, data []byte, scrub func(any) any) ([]byte, error) {
	if s, _ := scrub(string(data)).(string); s == string(data) {
		return data, nil
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	cleaned, err := json.Marshal(scrub(v))
	if err != nil {
		return nil, err
	}
	st, err := graph.ParseState(id, cleaned)
	if err != nil {
		return nil, fmt.Errorf("the scrubbed state does not read back: %w", err)
	}
	return graph.MarshalState(st)
}

// staleTempAge is the age after which a temp file of an interrupted Save is
// removed. A Save writes its temp file in milliseconds, so a younger one may
// belong to a Save in progress in another process and is left alone.
const staleTempAge = 10 * time.Minute

// removeTemps deletes temp files that a process killed in the middle of a
// Save left in dir and that are older than minAge, so that they do not
// linger in the checkout. Best-effort: failures are ignored.
func removeTemps(dir string, minAge time.Duration) {
	matches, _ := filepath.Glob(filepath.Join(dir, "."+StateFileName+".tmp-*"))
	for _, m := range matches {
		if info, err := os.Lstat(m); err == nil && info.Mode().IsRegular() && time.Since(info.ModTime()) >= minAge {
			_ = os.Remove(m)
		}
	}
}

// prepareDir creates id's state directory (0755) after checking that no
// existing directory between the repository root and it is a symbolic
// link: the spec tree is writable by the agent, and a link must not make
// theloop write state outside the checkout.
func (s *FileStore) prepareDir(id, dir string) error {
	rel, err := filepath.Rel(s.repoRoot, dir)
	if err != nil {
		return fmt.Errorf("%w: %s is not under %s", ErrUnsafePath, dir, s.repoRoot)
	}
	cur := s.repoRoot
	for _, seg := range strings.Split(rel, string(filepath.Separator)) {
		cur = filepath.Join(cur, seg)
		info, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			break
		}
		if err != nil {
			return fmt.Errorf("checking %s: %w", cur, err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s is a symbolic link; theloop writes work item state only inside the checkout — replace the link with a directory", ErrUnsafePath, cur)
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating the spec directory of %s: %w", id, err)
	}
	return nil
}

// preserveCorrupt keeps an unparseable state file under a corrupt-<ts>
// name before it is replaced. A missing or parseable file needs nothing; a
// file larger than MaxStateBytes counts as unparseable and is never read
// into memory (a hard link keeps it; the copy fallback streams it).
func (s *FileStore) preserveCorrupt(id, path string) error {
	data, err := readCapped(path, MaxStateBytes)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	oversized := errors.Is(err, ErrTooLarge)
	if oversized {
		err = nil // readable, only too large to parse: copy it by streaming
	}
	if err == nil && !oversized {
		if _, perr := graph.ParseState(id, data); perr == nil {
			return nil
		}
	}
	// Unparseable, or unreadable: keep it. A hard link keeps the very inode
	// (whatever we could read of it) and never replaces an existing name;
	// copying is the fallback for filesystems without links.
	base := path + corruptInfix + s.clock.Now().UTC().Format(corruptStamp)
	for n := 0; n < 1000; n++ {
		name := base
		if n > 0 {
			name = base + "." + strconv.Itoa(n)
		}
		lerr := os.Link(path, name)
		if lerr == nil {
			return atomicfile.SyncDir(filepath.Dir(path))
		}
		if errors.Is(lerr, fs.ErrExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s does not parse and cannot be read or preserved (%v; %v); it was left in place — move it aside by hand, then retry", path, err, lerr)
		}
		cerr := copyExclusive(name, path)
		if cerr == nil {
			return atomicfile.SyncDir(filepath.Dir(path))
		}
		if errors.Is(cerr, fs.ErrExist) {
			continue
		}
		return fmt.Errorf("%s does not parse and could not be preserved as %s (%v); it was left in place — free disk space or move it aside by hand, then retry", path, name, cerr)
	}
	return fmt.Errorf("%s does not parse and 1000 corrupt copies named %s* already exist; remove old copies, then retry", path, base)
}

// copyExclusive copies the regular file src to a new file name, failing if
// name exists. It streams, so an oversized state file is copied in
// constant memory.
func copyExclusive(name, src string) error {
	in, err := openRegular(src, os.O_RDONLY, 0)
	if err != nil {
		return err
	}
	defer in.Close()
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(name)
		return err
	}
	return f.Close()
}

// Lock implements graph.Store: it takes an exclusive advisory lock on id's
// graph-state.lock (creating the directory and file as needed), trying
// every poll interval until timeout, then fails with an error wrapping
// graph.ErrBusy that names the file. A cancelled ctx stops the wait with
// ctx's error. The returned unlock is idempotent and safe to defer.
func (s *FileStore) Lock(ctx context.Context, id string, timeout time.Duration) (func(), error) {
	dir, err := s.dir(id)
	if err != nil {
		return nil, err
	}
	if err := s.prepareDir(id, dir); err != nil {
		return nil, err
	}
	excludeLocalState(s.repoRoot) // the lock is this machine's, never the repository's
	unlock, err := lockFile(ctx, filepath.Join(dir, LockFileName), timeout, s.poll)
	if err != nil {
		return nil, err
	}
	// Under the lock no other Save of this work item is running (writers
	// hold it): any temp file left is a killed Save's. Remove them now
	// rather than ten minutes on.
	removeTemps(dir, 0)
	return unlock, nil
}

// lockFile polls tryLock until it succeeds, ctx ends or timeout passes.
func lockFile(ctx context.Context, path string, timeout, poll time.Duration) (func(), error) {
	unlock, err := tryLock(path)
	if err == nil || !errors.Is(err, errLockHeld) {
		return unlock, wrapLockErr(path, err)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	ticker := time.NewTicker(poll)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for %s: %w", path, ctx.Err())
		case <-timer.C:
			unlock, err := tryLock(path)
			if errors.Is(err, errLockHeld) {
				return nil, fmt.Errorf("%w (%s); wait for it or check for a stuck process (fuser -v %s)", graph.ErrBusy, path, path)
			}
			return unlock, wrapLockErr(path, err)
		case <-ticker.C:
			unlock, err := tryLock(path)
			if err == nil || !errors.Is(err, errLockHeld) {
				return unlock, wrapLockErr(path, err)
			}
		}
	}
}

func wrapLockErr(path string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("locking %s: %w", path, err)
}

// errLockHeld is tryLock's "somebody else has it".
var errLockHeld = errors.New("lock held")

// segmentPattern is one segment of a state sub-path or repo state key.
var segmentPattern = lazyre.New(`^[A-Za-z0-9._-]+$`)

func validateSubPath(sub string) error {
	if sub == "" {
		return nil
	}
	if strings.HasPrefix(sub, "/") {
		return fmt.Errorf("%w: state sub-path %q is absolute; use a path relative to the work item's spec directory such as pr-loops/pr-7", ErrUnsafePath, sub)
	}
	for _, seg := range strings.Split(sub, "/") {
		if seg == "." || seg == ".." || !segmentPattern.MatchString(seg) {
			return fmt.Errorf("%w: state sub-path %q has segment %q; a segment matches [A-Za-z0-9._-]+ and is not . or .. (e.g. pr-loops/pr-7)", ErrUnsafePath, sub, seg)
		}
	}
	return nil
}

// RepoStateKey turns "owner/repo" (or "host/owner/repo") into the directory
// name "owner__repo", refusing — never sanitising — unusable names (see
// hooks.RepoStateKey, which await-inner-loops uses on the same paths).
func RepoStateKey(repo string) (string, error) {
	key, err := hooks.RepoStateKey(repo)
	if err != nil {
		return "", fmt.Errorf("%w: repository %v", ErrUnsafePath, err)
	}
	return key, nil
}

// PRLoopSubPath returns the state sub-path of an inner (PR) loop:
// "pr-loops/pr-<n>" when the pull request lives in the origin repository
// (prRepo empty or equal to originRepo, compared case-insensitively), else
// "pr-loops/<owner>__<repo>/pr-<n>". Pass it to WithStateSubPath.
func PRLoopSubPath(prRepo, originRepo string, pr int) (string, error) {
	if pr <= 0 {
		return "", fmt.Errorf("%w: pull request number %d must be positive", ErrUnsafePath, pr)
	}
	leaf := "pr-" + strconv.Itoa(pr)
	if prRepo == "" || strings.EqualFold(prRepo, originRepo) {
		return "pr-loops/" + leaf, nil
	}
	key, err := RepoStateKey(prRepo)
	if err != nil {
		return "", err
	}
	return "pr-loops/" + key + "/" + leaf, nil
}

var _ graph.Store = (*FileStore)(nil)
