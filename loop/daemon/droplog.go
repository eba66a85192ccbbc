package daemon

import (
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
)

// DropLogInterval is how often, at most, loopd writes one line per drop
// reason on its log (stderr under systemd).
const DropLogInterval = time.Minute

// dropLog tells the operator on loopd's log why events are dropped
// (routing.dropped: an unbound repository, an unauthorized actor, a
// self-authored comment…), not only in the event log: the first drop of a
// reason is written at once, later ones are counted and summed up at most
// once per interval per reason, so a flood of noise costs one line a
// minute. It is a graph.Sink; it keeps no goroutine (a summary is written
// when the next event of that reason arrives after the interval).
type dropLog struct {
	out      io.Writer
	now      func() time.Time
	interval time.Duration

	mu      sync.Mutex
	reasons map[string]*dropReason
}

type dropReason struct {
	last    time.Time // when a line was last written
	pending int       // drops since then
}

func newDropLog(out io.Writer, now func() time.Time, interval time.Duration) *dropLog {
	return &dropLog{out: out, now: now, interval: interval, reasons: map[string]*dropReason{}}
}

// maxDropReasons bounds the map: reasons come from a fixed vocabulary,
// but the bound costs nothing.
const maxDropReasons = 64

func (l *dropLog) Emit(e graph.LogEvent) {
	if e.Name != ingress.EventDropped {
		return
	}
	reason, example := "", ""
	var parts []string
	for _, f := range e.Fields {
		switch f.Key {
		case "reason":
			reason = fmt.Sprint(f.Value)
		case "gh_event", "action", "actor", "sender", "repository", "work_item":
			if s := fmt.Sprint(f.Value); s != "" {
				parts = append(parts, f.Key+"="+s)
			}
		}
	}
	sort.Strings(parts)
	example = strings.Join(parts, " ")
	now := l.now()
	l.mu.Lock()
	r, ok := l.reasons[reason]
	if !ok {
		if len(l.reasons) >= maxDropReasons {
			l.mu.Unlock()
			return
		}
		r = &dropReason{}
		l.reasons[reason] = r
	}
	var line string
	switch {
	case !ok:
		r.last = now
		line = fmt.Sprintf("loopd: dropped an event: %s (%s); further drops for this reason are summed up once a minute (routing.dropped in the event log has each one)", reason, example)
	case now.Sub(r.last) >= l.interval:
		n := r.pending + 1
		line = fmt.Sprintf("loopd: dropped %d event(s) in the last %s: %s (e.g. %s)", n, now.Sub(r.last).Round(time.Second), reason, example)
		r.last, r.pending = now, 0
	default:
		r.pending++
	}
	l.mu.Unlock()
	if line != "" {
		fmt.Fprintln(l.out, line)
	}
}

var _ graph.Sink = (*dropLog)(nil)
