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
}

var errReadOnly = errors.New("artifacts are read-only during check")

func (*readOnly) WriteFile(string, []byte) error { return errReadOnly }

func (*readOnly) AppendFile(string, []byte) error { return errReadOnly }

// Stat implements fs.StatFS (through the wrapped artifacts' own Stat when
// they have one), remembering answers for the evaluation: hooks ask about
// the same files over and over.
func (r *readOnly) Stat(name string) (fs.FileInfo, error) {
	type stat struct {
		fi  fs.FileInfo
		err error
	}
	st := r.Memo("stat\x00"+name, func() any {
		fi, err := fs.Stat(r.Artifacts, name)
		return stat{fi, err}
	}).(stat)
	return st.fi, st.err
}

// ReadDir implements fs.ReadDirFS, remembering listings for the
// evaluation like Stat: fs.Glob lists the same directories for each
// pattern (the inner loops under pr-loops/ are globbed twice per check).
// Each caller gets its own copy of the slice.
func (r *readOnly) ReadDir(name string) ([]fs.DirEntry, error) {
	type listing struct {
		entries []fs.DirEntry
		err     error
	}
	l := r.Memo("dir\x00"+name, func() any {
		entries, err := fs.ReadDir(r.Artifacts, name)
		return listing{entries, err}
	}).(listing)
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
