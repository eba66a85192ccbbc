package loop

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// MergeEvents reads the events matching q from several logs (each with
// its rotated files) and merges them oldest first by their ts; events with
// the same ts keep the order of paths, then of their file. Paths naming
// the same file are read once; a missing log has no events. q.Limit keeps
// the last ones of the merged list.
func MergeEvents(paths []string, q EventQuery) ([]EventRecord, error) {
	limit := q.Limit
	q.Limit = 0
	var all []EventRecord
	for _, p := range DistinctLogs(paths) {
		_, err := scanEvents(p, q, openLogNoFollow, func(rec EventRecord) error {
			all = append(all, rec)
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	sort.SliceStable(all, func(i, j int) bool { return all[i].Time.Before(all[j].Time) })
	if limit > 0 && len(all) > limit {
		all = all[len(all)-limit:]
	}
	return all, nil
}

// DistinctLogs drops empty paths and paths naming a file (or, for a log
// not written yet, a path) already listed.
func DistinctLogs(paths []string) []string {
	var out []string
	var infos []fs.FileInfo
next:
	for _, p := range paths {
		if p == "" {
			continue
		}
		fi, err := os.Stat(p)
		for i, q := range out {
			if q == p || err == nil && infos[i] != nil && os.SameFile(fi, infos[i]) {
				continue next
			}
		}
		out = append(out, p)
		infos = append(infos, fi)
	}
	return out
}

// openLogNoFollow opens a log for reading without following a symbolic
// link, in a directory that is not one. The logs merged include those in
// the agents' checkouts, which the agent writes: a link planted there must
// not make loopd (the dashboard) or the operator read a file outside.
// Refused files read as missing (ErrNotExist), so they add no events.
func openLogNoFollow(path string) (*os.File, error) {
	dir := filepath.Dir(path)
	for _, d := range []string{dir, filepath.Dir(dir)} {
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: %s is a symbolic link", fs.ErrNotExist, d)
		}
	}
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if err != nil {
		if fi, lerr := os.Lstat(path); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return nil, fmt.Errorf("%w: %s is a symbolic link", fs.ErrNotExist, path)
		}
		return nil, err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || singleLink(f) != nil {
		f.Close()
		return nil, fmt.Errorf("%w: %s is not a regular file with one link", fs.ErrNotExist, path)
	}
	return f, nil
}

// maxTailChunk bounds what one Poll reads from one file.
const maxTailChunk = 8 << 20

// EventTail follows one event log: each Poll returns the complete lines
// appended since the previous one that match its query. It survives the
// log's rotation (the rest of the rotated file is read before the new
// one, from its start) and truncation (reading starts again at the new
// end's beginning). Not safe for concurrent use; Close releases the file.
type EventTail struct {
	path string
	q    EventQuery
	f    *os.File
	off  int64
	rest []byte // a line not finished yet
}

// TailEvents starts following the log at path from its current end (a
// missing log is followed from its creation).
func TailEvents(path string, q EventQuery) *EventTail {
	t := &EventTail{path: path, q: q}
	if f, err := openLogNoFollow(path); err == nil {
		if fi, err := f.Stat(); err == nil {
			t.f, t.off = f, fi.Size()
		} else {
			f.Close()
		}
	}
	return t
}

// Path is the followed log.
func (t *EventTail) Path() string { return t.path }

// Close closes the followed file.
func (t *EventTail) Close() error {
	if t.f == nil {
		return nil
	}
	err := t.f.Close()
	t.f = nil
	return err
}

// Poll returns the matching events appended since the last Poll, in file
// order. Malformed lines are skipped.
func (t *EventTail) Poll() ([]EventRecord, error) {
	var out []EventRecord
	fi, err := os.Stat(t.path)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	if t.f != nil {
		cur, cerr := t.f.Stat()
		if cerr != nil || fi == nil || !os.SameFile(cur, fi) {
			// Rotated (or removed): finish the old file, then start the
			// new one from its beginning.
			if cerr == nil {
				out = t.drain(out, cur.Size())
			}
			t.f.Close()
			t.f, t.off, t.rest = nil, 0, nil
		}
	}
	if fi == nil {
		return out, nil
	}
	if t.f == nil {
		f, err := openLogNoFollow(t.path)
		if errors.Is(err, fs.ErrNotExist) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		t.f = f
	}
	if fi.Size() < t.off {
		t.off, t.rest = 0, nil // truncated
	}
	return t.drain(out, fi.Size()), nil
}

// drain reads t.f from t.off up to size and appends the matching complete
// lines.
func (t *EventTail) drain(out []EventRecord, size int64) []EventRecord {
	for t.off < size {
		n := min(size-t.off, maxTailChunk)
		b, err := io.ReadAll(io.NewSectionReader(t.f, t.off, n))
		if err != nil || len(b) == 0 {
			return out
		}
		t.off += int64(len(b))
		b = append(t.rest, b...)
		for {
			i := bytes.IndexByte(b, '\n')
			if i < 0 {
				break
			}
			if rec, err := ParseEventLine(bytes.Clone(b[:i])); err == nil && t.q.Match(rec) {
				out = append(out, rec)
			}
			b = b[i+1:]
		}
		if len(b) > maxEventLine {
			b = nil // a line too long to keep: dropped, as the reader does
		}
		t.rest = append([]byte(nil), b...)
	}
	return out
}

// WorkItemMatches reports whether a queried work item (a ref, or a bare id
// such as issue-42, 42 or #42) names the logged or registered one v, as
// EventQuery.WorkItem matches.
func WorkItemMatches(q, v string) bool { return workItemMatches(q, v) }
