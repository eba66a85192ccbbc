package usage

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Bounds on reading a record.
const (
	// MaxLine bounds one line of a record; a longer line is skipped whole
	// (a Codex session's first line holds its instructions, tens of KiB).
	MaxLine = 1 << 20
	// MaxRead bounds what one Read takes from a record: a record that grew
	// by more is caught up over several polls.
	MaxRead = 8 << 20
)

// ErrOutsideHome marks a record path that leaves the home it was found in
// (a link planted by the agent).
var ErrOutsideHome = errors.New("usage: record lies outside the session's home")

// ErrNotRegular marks a record that is not a regular file.
var ErrNotRegular = errors.New("usage: record is not a regular file")

// Position is how far a record was read: its identity (device and inode,
// so a replaced file is read from its start) and the offset of the first
// byte not yet consumed. It is what the daemon persists between polls.
type Position struct {
	Dev    uint64 `json:"dev"`
	Ino    uint64 `json:"ino"`
	Offset int64  `json:"offset"`
	// Skipping is set while the reader is inside a line longer than
	// MaxLine (it discards up to the next newline).
	Skipping bool `json:"skipping,omitempty"`
}

// Tail reads one record incrementally. Home is the directory the record
// must stay inside (the session's home as the harness sees it, on the
// daemon's side of the world).
type Tail struct {
	Home   string
	Path   string
	Pos    Position
	parser Parser
	// limit, when set, stops a Read there (Prime).
	limit int64
}

// NewTail returns a Tail of path, a record of harness, read from pos.
func NewTail(harness, home, path string, pos Position) (*Tail, error) {
	p, ok := NewParser(harness)
	if !ok {
		return nil, fmt.Errorf("usage: harness %q keeps no record theloop reads", harness)
	}
	return &Tail{Home: home, Path: path, Pos: pos, parser: p}, nil
}

// Read returns the turns of the complete lines written since the last
// Read (at most MaxRead bytes of them). A line still being written (no
// newline yet) is left for the next Read. A file whose identity changed
// or that shrank below the position is read from its start (its parser's
// memory of repeats still applies).
func (t *Tail) Read() ([]Turn, error) {
	f, err := openInside(t.Home, t.Path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	dev, ino, ok := identity(fi)
	if !ok {
		return nil, ErrNotRegular
	}
	if dev != t.Pos.Dev || ino != t.Pos.Ino || fi.Size() < t.Pos.Offset {
		t.Pos = Position{Dev: dev, Ino: ino}
	}
	if fi.Size() == t.Pos.Offset {
		return nil, nil
	}
	size := fi.Size()
	if t.limit > 0 {
		size = min(size, t.limit)
	}
	if size <= t.Pos.Offset {
		return nil, nil
	}
	n := min(size-t.Pos.Offset, MaxRead)
	buf := make([]byte, n)
	got, err := f.ReadAt(buf, t.Pos.Offset)
	if err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	buf = buf[:got]
	var turns []Turn
	consumed := 0
	for consumed < len(buf) {
		rest := buf[consumed:]
		nl := bytes.IndexByte(rest, '\n')
		if nl < 0 {
			if len(rest) > MaxLine || t.Pos.Skipping {
				// A line past the bound: drop what there is and keep
				// dropping until its end.
				t.Pos.Skipping = true
				consumed = len(buf)
			}
			break
		}
		line := rest[:nl]
		consumed += nl + 1
		if t.Pos.Skipping {
			t.Pos.Skipping = false
			continue
		}
		if len(line) > MaxLine {
			continue
		}
		turns = append(turns, t.parser.Line(line)...)
	}
	t.Pos.Offset += int64(consumed)
	return turns, nil
}

// Prime feeds the parser what was read before pos (in an earlier
// process), charging nothing, so that it knows the repeats and running
// totals it saw; then the Tail stands at pos. A record that is no longer
// the file pos describes is read from its start instead.
func (t *Tail) Prime(pos Position) error {
	f, err := openInside(t.Home, t.Path)
	if err != nil {
		return err
	}
	fi, err := f.Stat()
	f.Close()
	if err != nil {
		return err
	}
	dev, ino, ok := identity(fi)
	if !ok || dev != pos.Dev || ino != pos.Ino || fi.Size() < pos.Offset {
		return nil // another file now: read from its start
	}
	t.Pos = Position{Dev: dev, Ino: ino}
	t.limit = pos.Offset
	defer func() { t.limit = 0 }()
	for t.Pos.Offset < pos.Offset {
		at := t.Pos.Offset
		if _, err := t.Read(); err != nil {
			return err
		}
		if t.Pos.Offset == at {
			break
		}
	}
	t.Pos = pos
	return nil
}

func identity(fi os.FileInfo) (dev, ino uint64, ok bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, 0, false
	}
	return uint64(st.Dev), uint64(st.Ino), true //nolint:unconvert // Dev's type varies by platform
}

// openInside opens path for reading when it is a regular file below
// home, resolved inside home (os.Root: a link the agent planted on the way
// never takes the read out of it), without following a link at the file
// itself and without blocking on a FIFO.
func openInside(home, path string) (*os.File, error) {
	rel, err := filepath.Rel(home, path)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) || filepath.IsAbs(rel) {
		return nil, fmt.Errorf("%w: %s", ErrOutsideHome, path)
	}
	root, err := os.OpenRoot(home)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	f, err := root.OpenFile(rel, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		if strings.Contains(err.Error(), "escapes") {
			return nil, fmt.Errorf("%w: %s", ErrOutsideHome, path)
		}
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%w: %s", ErrNotRegular, path)
	}
	return f, nil
}
