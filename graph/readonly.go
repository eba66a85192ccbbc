package graph

import (
	"errors"
	"io/fs"
	"slices"
	"sync"
	"unsafe"
)

// Memoizer is implemented by the Artifacts that check-mode chains receive:
// nothing can change the files during a check, so a parse of one file can be
// shared by every hook of the evaluation. Hooks use it when present.
type Memoizer interface {
	Memo(key string, compute func() any) any
}

// Lender is implemented by Artifacts that can lend the bytes of a file
// for the length of one check instead of giving them away: the runtime
// gives every loan back when the check's report is complete and no hook
// of it is still running, and the lender reuses the buffer for the next
// read. `check --all` reads megabytes of specifications; fresh buffers for
// them were half of what a check allocated, paid in garbage collection
// and page faults.
type Lender interface {
	// Lend reads name as ReadFile would. The caller must not write the
	// bytes, and nothing that shares their memory may outlive the loan.
	Lend(name string) ([]byte, error)
	// GiveBack ends the loan of data: the bytes are the lender's again.
	GiveBack(data []byte)
}

// Borrower is implemented by the Artifacts that check-mode chains receive.
// Borrow reads name like fs.ReadFile, but the bytes are valid only until
// the check ends: a hook may parse them into values it memoises for the
// check (Memoizer), but must not write them, and its results — messages,
// data — must not share their memory (copy a substring that goes into a
// message; fmt and string concatenation copy).
type Borrower interface {
	Borrow(name string) ([]byte, error)
}

// readOnly wraps Artifacts for ModeCheck: reads pass through, writes fail,
// and parse results are memoised for the evaluation.
type readOnly struct {
	Artifacts
	mu   sync.Mutex
	memo map[string]any
	// loans are the bytes Borrow lent (Lender), to give back.
	loans [][]byte
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

var (
	_ Memoizer = (*readOnly)(nil)
	_ Borrower = (*readOnly)(nil)
)

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

// Borrow implements Borrower: a loan from the wrapped artifacts when they
// are a Lender, otherwise bytes of the caller's own (fs.ReadFile).
func (r *readOnly) Borrow(name string) ([]byte, error) {
	l, ok := r.Artifacts.(Lender)
	if !ok {
		return fs.ReadFile(r.Artifacts, name)
	}
	data, err := l.Lend(name)
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.loans = append(r.loans, data)
	r.mu.Unlock()
	return data, nil
}

// lent reports whether s shares memory with a loan not yet given back.
func (r *readOnly) lent(s string) bool {
	if len(s) == 0 {
		return false
	}
	p := uintptr(unsafe.Pointer(unsafe.StringData(s)))
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.loans {
		start := uintptr(unsafe.Pointer(unsafe.SliceData(b)))
		if p >= start && p < start+uintptr(cap(b)) {
			return true
		}
	}
	return false
}

// settle gives every loan back and forgets the memoised parses (which
// share the loans' memory). Only the evaluation's owner calls it, once no
// hook of the check can still be running.
func (r *readOnly) settle() {
	r.mu.Lock()
	loans := r.loans
	r.loans, r.memo = nil, nil
	r.mu.Unlock()
	if l, ok := r.Artifacts.(Lender); ok {
		for _, data := range loans {
			l.GiveBack(data)
		}
	}
}

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
