package dashboard

import (
	"bytes"
	"io"
	"os"
	"time"

	"github.com/theloop-dev/theloop/loop"
)

// Event-log watching bounds.
const (
	defaultTailInterval = 100 * time.Millisecond
	maxTailRead         = 4 << 20
	maxTailLine         = 1 << 20
)

// tailer watches the shared event log for lines other processes write —
// `loopctl graph complete` run by an agent, `loop-gate`, a CI check — so a
// transition anywhere updates the board, not only the daemon's own. It
// starts at the file's end, follows rotation (the file shrinking or being
// replaced), and calls notify with each new line's work item.
type tailer struct {
	path     string
	interval time.Duration
	notify   func(ref string)

	stop chan struct{}
	done chan struct{}

	f    *os.File
	off  int64
	rest []byte
}

func startTailer(path string, interval time.Duration, notify func(string)) *tailer {
	if interval <= 0 {
		interval = defaultTailInterval
	}
	t := &tailer{path: path, interval: interval, notify: notify, stop: make(chan struct{}), done: make(chan struct{})}
	if fi, err := os.Stat(path); err == nil {
		t.off = fi.Size()
	}
	go t.run()
	return t
}

func (t *tailer) close() {
	close(t.stop)
	<-t.done
}

func (t *tailer) run() {
	defer close(t.done)
	tick := time.NewTicker(t.interval)
	defer tick.Stop()
	defer func() {
		if t.f != nil {
			t.f.Close()
		}
	}()
	for {
		select {
		case <-t.stop:
			return
		case <-tick.C:
			t.read()
		}
	}
}

// read reads what was appended since the last call.
func (t *tailer) read() {
	fi, err := os.Stat(t.path)
	if err != nil || !fi.Mode().IsRegular() {
		return // a named pipe in its place would block the open forever
	}
	if t.f != nil {
		if cur, err := t.f.Stat(); err != nil || !os.SameFile(cur, fi) {
			t.f.Close()
			t.f, t.off, t.rest = nil, 0, nil // rotated: read the new file from its start
		}
	}
	if t.f == nil {
		f, err := os.Open(t.path)
		if err != nil {
			return
		}
		t.f = f
	}
	if fi.Size() < t.off {
		t.off, t.rest = 0, nil // truncated
	}
	if fi.Size() == t.off {
		return
	}
	b, err := io.ReadAll(io.LimitReader(io.NewSectionReader(t.f, t.off, fi.Size()-t.off), maxTailRead))
	if err != nil {
		return
	}
	t.off += int64(len(b))
	b = append(t.rest, b...)
	seen := map[string]bool{}
	for {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			break
		}
		if rec, err := loop.ParseEventLine(b[:i]); err == nil {
			if v, ok := rec.Get("work_item"); ok {
				if ref, _ := v.(string); ref != "" && !seen[ref] {
					seen[ref] = true
				}
			}
		}
		b = b[i+1:]
	}
	if len(b) > maxTailLine {
		b = nil // a line that long is no event line; drop it
	}
	t.rest = append([]byte(nil), b...)
	for ref := range seen {
		t.notify(ref)
	}
}
