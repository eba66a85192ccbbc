package usage

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/loop/api"
)

// Key is where a turn is charged.
type Key struct {
	Repository string `json:"repository"`
	Item       string `json:"item"`
	Session    string `json:"session"`
	Harness    string `json:"harness"`
	Node       string `json:"node"`
	Model      string `json:"model"`
	// Day is the UTC date the turn ran (2006-01-02).
	Day string `json:"day"`
}

// Tally is what was charged to one Key.
type Tally struct {
	Tokens Tokens `json:"tokens"`
	Turns  int64  `json:"turns"`
}

// maxEntries bounds the ledger's keys: past it, new keys are charged to
// a key with Node and Session "(overflow)" so the totals stay right.
const maxEntries = 200_000

// Ledger keeps the usage of every session, persisted in one file with the
// positions its records were read to (so a restart neither loses nor
// double-counts a turn). It is safe for concurrent use.
type Ledger struct {
	path string
	mu   sync.Mutex
	m    map[Key]*Tally
	// byItem and byRepoDay index the tokens by model for the sums the
	// board and the budgets ask on every render and poll.
	byItem    map[string]map[string]Tokens
	byRepoDay map[string]map[string]Tokens
	pos       map[string]Position
	// extra is opaque state the daemon keeps beside (its budget marks).
	extra json.RawMessage
}

type ledgerFile struct {
	Version   int                 `json:"version"`
	Entries   []ledgerEntry       `json:"entries"`
	Positions map[string]Position `json:"positions"`
	Extra     json.RawMessage     `json:"extra,omitempty"`
}

type ledgerEntry struct {
	Key
	Tally
}

// maxLedgerFile bounds the ledger file read at start.
const maxLedgerFile = 256 << 20

// OpenLedger reads the ledger at path (absent: empty). An unreadable
// ledger is an error naming the file: loopd must not start counting from
// zero over a budget it lost.
func OpenLedger(path string) (*Ledger, error) {
	l := &Ledger{path: path, m: map[Key]*Tally{}, pos: map[string]Position{}, byItem: map[string]map[string]Tokens{}, byRepoDay: map[string]map[string]Tokens{}}
	fi, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return nil, fmt.Errorf("usage ledger %s: %w", path, err)
	}
	if fi.Size() > maxLedgerFile {
		return nil, fmt.Errorf("usage ledger %s: %d bytes, more than a ledger holds (%d); move it aside to start afresh", path, fi.Size(), maxLedgerFile)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("usage ledger %s: %w", path, err)
	}
	var f ledgerFile
	if err := json.Unmarshal(b, &f); err != nil {
		return nil, fmt.Errorf("usage ledger %s: %w; move it aside to start afresh", path, err)
	}
	for _, e := range f.Entries {
		t := e.Tally
		l.m[e.Key] = &t
		l.index(e.Key, t.Tokens)
	}
	if f.Positions != nil {
		l.pos = f.Positions
	}
	l.extra = f.Extra
	return l, nil
}

// Save writes the ledger (atomically).
func (l *Ledger) Save() error {
	l.mu.Lock()
	f := ledgerFile{Version: 1, Positions: l.pos, Extra: l.extra, Entries: make([]ledgerEntry, 0, len(l.m))}
	for k, t := range l.m {
		f.Entries = append(f.Entries, ledgerEntry{k, *t})
	}
	l.mu.Unlock()
	sort.Slice(f.Entries, func(i, j int) bool { return lessKey(f.Entries[i].Key, f.Entries[j].Key) })
	b, err := json.Marshal(f)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(l.path), 0o700); err != nil {
		return err
	}
	return atomicfile.Write(l.path, b, 0o600)
}

func lessKey(a, b Key) bool {
	x := []string{a.Repository, a.Item, a.Session, a.Node, a.Model, a.Day, a.Harness}
	y := []string{b.Repository, b.Item, b.Session, b.Node, b.Model, b.Day, b.Harness}
	return slices.Compare(x, y) < 0
}

// Charge adds turn t to k.
func (l *Ledger) Charge(k Key, t Turn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	e := l.m[k]
	if e == nil {
		if len(l.m) >= maxEntries {
			k.Node, k.Session = "(overflow)", "(overflow)"
			e = l.m[k]
		}
		if e == nil {
			e = &Tally{}
			l.m[k] = e
		}
	}
	e.Tokens = e.Tokens.Add(t.Tokens)
	e.Turns++
	l.index(k, t.Tokens)
}

func (l *Ledger) index(k Key, t Tokens) {
	add := func(m map[string]map[string]Tokens, key string) {
		mm := m[key]
		if mm == nil {
			mm = map[string]Tokens{}
			m[key] = mm
		}
		mm[k.Model] = mm[k.Model].Add(t)
	}
	add(l.byItem, k.Item)
	add(l.byRepoDay, k.Repository+"\x00"+k.Day)
}

// Position returns where record path was read to.
func (l *Ledger) Position(path string) Position {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.pos[path]
}

// SetPosition records where record path was read to.
func (l *Ledger) SetPosition(path string, p Position) {
	l.mu.Lock()
	l.pos[path] = p
	l.mu.Unlock()
}

// PrunePositions forgets the positions of the records keep refuses.
func (l *Ledger) PrunePositions(keep func(path string) bool) {
	l.mu.Lock()
	paths := make([]string, 0, len(l.pos))
	for p := range l.pos {
		paths = append(paths, p)
	}
	l.mu.Unlock()
	for _, p := range paths {
		if !keep(p) {
			l.mu.Lock()
			delete(l.pos, p)
			l.mu.Unlock()
		}
	}
}

// Extra returns the daemon's opaque state.
func (l *Ledger) Extra() json.RawMessage {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.extra
}

// SetExtra replaces the daemon's opaque state (saved with the ledger).
func (l *Ledger) SetExtra(b json.RawMessage) {
	l.mu.Lock()
	l.extra = b
	l.mu.Unlock()
}

// Each calls fn for every key and its tally (under the ledger's lock: fn
// must not call the ledger).
func (l *Ledger) Each(fn func(Key, Tally)) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, t := range l.m {
		fn(k, *t)
	}
}

// Filter selects keys.
type Filter struct {
	Item, Repository, Day string
}

func (f Filter) match(k Key) bool {
	return (f.Item == "" || f.Item == k.Item) && (f.Repository == "" || f.Repository == k.Repository) && (f.Day == "" || f.Day == k.Day)
}

// Sum totals the tokens and estimated cost of the keys f selects; priced
// is false when a model among them has no rate (cost then counts the
// priced ones only).
func (l *Ledger) Sum(f Filter, rates Rates) (t Tokens, cost float64, priced bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	priced = true
	var idx map[string]Tokens
	indexed := true
	switch {
	case f.Item != "" && f.Repository == "" && f.Day == "":
		idx = l.byItem[f.Item]
	case f.Item == "" && f.Repository != "" && f.Day != "":
		idx = l.byRepoDay[f.Repository+"\x00"+f.Day]
	default:
		indexed = false
	}
	if indexed {
		for model, tk := range idx {
			t = t.Add(tk)
			c, ok := rates.Cost(model, tk)
			cost += c
			priced = priced && ok
		}
		return t, cost, priced
	}
	for k, e := range l.m {
		if !f.match(k) {
			continue
		}
		t = t.Add(e.Tokens)
		c, ok := rates.Cost(k.Model, e.Tokens)
		cost += c
		priced = priced && ok
	}
	return t, cost, priced
}

// Report groups the keys f selects by by (node, session, day, model,
// item, repository).
func (l *Ledger) Report(f Filter, by string, rates Rates) (api.UsageReport, error) {
	if by == "" {
		by = "node"
	}
	group := map[string]func(Key) string{
		"node": func(k Key) string { return k.Node }, "session": func(k Key) string { return k.Session },
		"day": func(k Key) string { return k.Day }, "model": func(k Key) string { return k.Model },
		"item": func(k Key) string { return k.Item }, "repository": func(k Key) string { return k.Repository },
	}[by]
	if group == nil {
		return api.UsageReport{}, fmt.Errorf("by=%q: group by one of %v", by, api.UsageGroupings)
	}
	rows := map[string]*row{}
	total := &row{}
	l.mu.Lock()
	for k, e := range l.m {
		if !f.match(k) {
			continue
		}
		g := group(k)
		r := rows[g]
		if r == nil {
			r = &row{}
			rows[g] = r
		}
		r.add(k.Model, *e, rates)
		total.add(k.Model, *e, rates)
	}
	l.mu.Unlock()
	rep := api.UsageReport{Item: f.Item, By: by, Rows: []api.UsageRow{}, Estimate: EstimateNote}
	for g, r := range rows {
		rep.Rows = append(rep.Rows, r.wire(g))
	}
	sort.Slice(rep.Rows, func(i, j int) bool { return rep.Rows[i].Key < rep.Rows[j].Key })
	rep.Total = total.wire("")
	return rep, nil
}

type row struct {
	t        Tokens
	turns    int64
	cost     float64
	models   map[string]bool
	unpriced map[string]bool
}

func (r *row) add(model string, e Tally, rates Rates) {
	if r.models == nil {
		r.models, r.unpriced = map[string]bool{}, map[string]bool{}
	}
	r.t = r.t.Add(e.Tokens)
	r.turns += e.Turns
	r.models[model] = true
	if c, ok := rates.Cost(model, e.Tokens); ok {
		r.cost += c
	} else {
		r.unpriced[model] = true
	}
}

func (r *row) wire(key string) api.UsageRow {
	w := api.UsageRow{Key: key, Turns: r.turns, Tokens: WireTokens(r.t)}
	for m := range r.models {
		w.Models = append(w.Models, m)
	}
	for m := range r.unpriced {
		w.Unpriced = append(w.Unpriced, m)
	}
	sort.Strings(w.Models)
	sort.Strings(w.Unpriced)
	if len(w.Unpriced) == 0 {
		c := r.cost
		w.Cost = &c
	}
	return w
}

// WireTokens is t as the API carries it.
func WireTokens(t Tokens) api.UsageTokens {
	return api.UsageTokens{Input: t.Input, Output: t.Output, CacheWrite: t.CacheWrite, CacheRead: t.CacheRead, Total: t.Total()}
}

// DayOf is the ledger's day of t.
func DayOf(t time.Time) string { return t.UTC().Format(time.DateOnly) }
