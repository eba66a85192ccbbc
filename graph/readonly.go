package graph

import (
	"errors"
	"io/fs"
	"slices"
	"sync"
)

// Memoizer is implemented by the Artifacts that check-mode chains receive:
// nothing can change the files during a check, so a parse of one file can be
// shared by every hook of the evaluation. Hooks use it when present.
type Memoizer interface {
	Memo(key string, compute func() any) any
}

// readOnly wraps Artifacts for ModeCheck: reads pass through, writes fail,
// and parse results are memoised for the evaluation.
type readOnly struct {
	Artifacts
	mu   sync.Mutex
	memo map[string]any
	// stats and dirs are Stat's and ReadDir's answers, keyed by the name
	// itself: a key built per call ("stat\x00"+name) would cost an
	// allocation on every hit.
	stats map[string]statAnswer
	dirs  map[string]dirAnswer
}

type statAnswer struct {
	fi  fs.FileInfo
	err error
}

type dirAnswer struct {
	entries []fs.DirEntry
	err     error
}

var errReadOnly = errors.New("artifacts are read-only during check")

func (*readOnly) WriteFile(string, []byte) error { return errReadOnly }

func (*readOnly) AppendFile(string, []byte) error { return errReadOnly }

// Stat implements fs.StatFS (through the wrapped artifacts' own Stat when
// they have one), remembering answers for the evaluation: hooks ask about
// the same files over and over.
func (r *readOnly) Stat(name string) (fs.FileInfo, error) {
	r.mu.Lock()
	st, ok := r.stats[name]
	r.mu.Unlock()
	if ok {
		return st.fi, st.err
	}
	fi, err := fs.Stat(r.Artifacts, name)
	r.mu.Lock()
	if r.stats == nil {
		r.stats = map[string]statAnswer{}
	}
	r.stats[name] = statAnswer{fi, err}
	r.mu.Unlock()
	return fi, err
}

// ReadDir implements fs.ReadDirFS, remembering listings for the
// evaluation like Stat: fs.Glob lists the same directories for each
// pattern (the inner loops under pr-loops/ are globbed twice per check).
// Each caller gets its own copy of the slice.
func (r *readOnly) ReadDir(name string) ([]fs.DirEntry, error) {
	r.mu.Lock()
	l, ok := r.dirs[name]
	r.mu.Unlock()
	if !ok {
		entries, err := fs.ReadDir(r.Artifacts, name)
		l = dirAnswer{entries, err}
		r.mu.Lock()
		if r.dirs == nil {
			r.dirs = map[string]dirAnswer{}
		}
		r.dirs[name] = l
		r.mu.Unlock()
	}
	return slices.Clone(l.entries), l.err
}

// ReadFile implements fs.ReadFileFS through the wrapped artifacts.
func (r *readOnly) ReadFile(name string) ([]byte, error) { return fs.ReadFile(r.Artifacts, name) }

// Memo implements Memoizer.
func (r *readOnly) Memo(key string, compute func() any) any {
	r.mu.Lock()
	if v, ok := r.memo[key]; ok {
		r.mu.Unlock()
		return v
	}
	r.mu.Unlock()
	v := compute()
	r.mu.Lock()
	if r.memo == nil {
		r.memo = map[string]any{}
	}
	r.memo[key] = v
	r.mu.Unlock()
	return v
}
