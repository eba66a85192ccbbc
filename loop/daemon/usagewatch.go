package daemon

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
	"github.com/theloop-dev/theloop/loop/daemon/usage"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// The usage watch (docs/usage.md): every usage.pollSeconds it reads, for
// each session in the registry, what its harness recorded since the last
// read (loop/daemon/usage: Claude Code's transcript, Codex's session log,
// Gemini's chat record, in the session's own home — the world's private
// copy), charges each turn to the node the item stood at when the turn ran
// (from loopd's own event log: graph.started, graph.advanced, graph.forced)
// and keeps it in <state root>/usage/ledger.json with where each record was
// read to. Budgets act on what it charged (usagebudget.go). What the
// record says moves no gate: it is the agent's file.

// UsageConfig is usage.* and routing.budget as loopd uses them.
type UsageConfig struct {
	Rates  usage.Rates
	Poll   time.Duration
	Budget loop.BudgetSettings
	// Off turns the watch off (tests that need no usage).
	Off bool
}

// DefaultUsagePoll is usage.pollSeconds' default.
const DefaultUsagePoll = 5 * time.Second

func usageConfigFromSettings(u loop.UsageSettings) UsageConfig {
	c := UsageConfig{Poll: u.Poll, Budget: u.Budget, Rates: usage.Rates{}}
	for m, r := range u.Rates {
		c.Rates[m] = usage.Rate{Input: r.Input, Output: r.Output, CacheWrite: r.CacheWrite, CacheRead: r.CacheRead}
	}
	return c
}

// turnClockGrace is how far before loopd's previous read of a record a
// turn's own timestamp is believed: a harness stamps a message when it
// starts writing it, and a slow write lands after loopd looked. Earlier
// stamps are the agent's word about the past and are clamped (they could
// only move cost between nodes, never past a gate).
const turnClockGrace = 10 * time.Second

// maxStays bounds the node history kept per item.
const maxStays = 256

// nodeStay is an item entering a node.
type nodeStay struct {
	at   time.Time
	node string
}

type usageWatch struct {
	d      *Daemon
	ledger *usage.Ledger

	mu     sync.Mutex // one poll at a time; guards everything below
	tails  map[string]*usage.Tail
	stays  map[string][]nodeStay // item ref → entries, oldest first
	events *loop.EventTail
	read   map[string]time.Time // session key → when its records were last read
	marks  budgetMarks
	// saved is when the ledger was last written; dirty that it changed
	// since.
	saved time.Time
	dirty bool

	stop chan struct{}
	done chan struct{}
}

// openUsage opens the ledger and reads the node history from the event
// log; nil (and a log line) when the ledger cannot be read.
func (d *Daemon) openUsage() *usageWatch {
	if d.cfg.Usage.Off {
		return nil
	}
	led, err := usage.OpenLedger(filepath.Join(d.cfg.StateRoot, "usage", "ledger.json"))
	if err != nil {
		d.logf("warning: usage is not counted: %v", err)
		return nil
	}
	w := &usageWatch{d: d, ledger: led, tails: map[string]*usage.Tail{}, stays: map[string][]nodeStay{},
		read: map[string]time.Time{}, stop: make(chan struct{}), done: make(chan struct{})}
	w.marks = loadMarks(led.Extra())
	if p := d.cfg.EventLog.Path; p != "" {
		// Follow first, then read what is there: a line written between the
		// two is seen twice (harmless), never missed.
		w.events = loop.TailEvents(p, loop.EventQuery{Event: "graph."})
		d.elog.Flush()
		_, _ = loop.ScanEvents(p, loop.EventQuery{Event: "graph."}, func(r loop.EventRecord) error {
			w.note(r)
			return nil
		})
	}
	if m := d.svc.metrics; m != nil {
		_ = m.Registry().Register(tokenCollector{w})
	}
	return w
}

func (w *usageWatch) start() {
	go func() {
		defer close(w.done)
		every := w.d.cfg.Usage.Poll
		if every <= 0 {
			every = DefaultUsagePoll
		}
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			w.poll(context.Background())
			select {
			case <-w.stop:
				return
			case <-t.C:
			}
		}
	}()
}

func (w *usageWatch) close() {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.events != nil {
		_ = w.events.Close()
	}
	if err := w.save(); err != nil {
		w.d.logf("warning: saving the usage ledger: %v", err)
	}
}

// note keeps an item's entry into a node.
func (w *usageWatch) note(r loop.EventRecord) {
	var node string
	str := func(k string) string { v, _ := r.Get(k); s, _ := v.(string); return s }
	switch r.Event {
	case graph.EventStarted:
		node = str("node")
	case graph.EventAdvanced, graph.EventForced:
		node = str("to")
	default:
		return
	}
	ref := canonicalRef(str("work_item"))
	if node == "" || ref == "" {
		return
	}
	s := append(w.stays[ref], nodeStay{at: r.Time, node: node})
	// The log is in write order, not quite time order (lines are queued).
	for i := len(s) - 1; i > 0 && s[i].at.Before(s[i-1].at); i-- {
		s[i], s[i-1] = s[i-1], s[i]
	}
	if len(s) > maxStays {
		s = s[len(s)-maxStays:]
	}
	w.stays[ref] = s
}

func canonicalRef(s string) string {
	if it, err := workitem.Parse(s); err == nil {
		return it.String()
	}
	return ""
}

// nodeAt is the node item stood at when t: its last entry at or before t,
// else loopd's own recompute of where it stands ("" unknown).
func (w *usageWatch) nodeAt(item workitem.Ref, t time.Time) string {
	s := w.stays[item.String()]
	for i := len(s) - 1; i >= 0; i-- {
		if !s[i].at.After(t) {
			return s[i].node
		}
	}
	if len(s) > 0 {
		return s[0].node
	}
	if w.d.link != nil {
		if cur := w.d.link.loadObserved(observedKey(item, workitem.Ref{})).Current; cur != "" {
			return cur
		}
	}
	return "(unknown)"
}

// harnessDirs are where rec's harness keeps its files, from loopd's side:
// the user's home and Claude Code's config dir, which in a world of its
// own are the world's private copy (sessions.Tmux.HostPath).
func (w *usageWatch) harnessDirs(rec sessions.Record) usage.Dirs {
	h, _ := os.UserHomeDir()
	d := usage.Dirs{Home: h, ClaudeConfig: w.d.harness.claudeConfigDir()}
	if w.d.tmux != nil && rec.TmuxName != "" {
		if d.Home != "" {
			d.Home = w.d.tmux.HostPath(rec.TmuxName, d.Home)
		}
		if d.ClaudeConfig != "" {
			d.ClaudeConfig = w.d.tmux.HostPath(rec.TmuxName, d.ClaudeConfig)
		}
	}
	return d
}

func sessionKey(rec sessions.Record) string {
	if rec.SessionID != "" {
		return rec.SessionID
	}
	return rec.TmuxName
}

// poll reads every session's records once and acts on the budgets of the
// items that spent.
func (w *usageWatch) poll(ctx context.Context) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.events != nil {
		w.d.elog.Flush()
		if evs, err := w.events.Poll(); err == nil {
			for _, r := range evs {
				w.note(r)
			}
		}
	}
	now := w.d.deps.Clock.Now().UTC()
	recs, _ := w.d.reg.List()
	spent := map[string]sessions.Record{}
	for _, rec := range recs {
		if rec.Cwd == "" {
			continue
		}
		if _, ok := usage.NewParser(rec.Harness); !ok {
			continue // usage unknown (docs/usage.md)
		}
		sk := sessionKey(rec)
		from := w.read[sk]
		if from.IsZero() {
			from = rec.Created
		}
		dirs := w.harnessDirs(rec)
		for _, p := range usage.Locate(rec.Harness, dirs, rec.Cwd, rec.SessionID) {
			turns := w.readRecord(rec.Harness, dirs.Root(rec.Harness), p)
			for _, t := range turns {
				at := t.At
				if at.IsZero() || at.After(now) {
					at = now
				}
				if lo := from.Add(-turnClockGrace); at.Before(lo) {
					at = lo // the agent's clock, believed only near when loopd last looked
				}
				item := budgetItem(rec)
				k := usage.Key{Repository: item.Owner + "/" + item.Repo, Item: item.String(), Session: sk,
					Harness: rec.Harness, Node: w.nodeAt(item, at), Model: t.Model, Day: usage.DayOf(at)}
				w.ledger.Charge(k, t)
			}
			if len(turns) > 0 {
				spent[budgetItem(rec).String()] = rec
			}
		}
		w.read[sk] = now
	}
	changed := len(spent) > 0
	for ref := range spent {
		w.d.dashHost.refresh(ref) // the row's figure, live
	}
	if w.checkBudgets(ctx, recs, spent, now) {
		changed = true
	}
	// The counts and the read positions are written together, so a crash
	// between two saves re-reads from the saved positions: nothing lost,
	// nothing counted twice. A budget's marks are saved at once, before
	// the effect they lead to (usagebudget.go).
	w.dirty = w.dirty || changed
	if w.dirty && now.Sub(w.saved) >= ledgerSaveEvery {
		if err := w.save(); err != nil {
			w.d.logf("warning: saving the usage ledger: %v", err)
		}
	}
}

// ledgerSaveEvery spaces the ledger's writes (it holds every key).
const ledgerSaveEvery = 15 * time.Second

// budgetItem is the work item a session's spending counts against (a
// pull request's own session counts against the work item it serves).
func budgetItem(rec sessions.Record) workitem.Ref {
	if !rec.Parent.IsZero() {
		return rec.Parent
	}
	return rec.Item
}

// readRecord reads one record from where it was read to. A tail new to
// this process whose ledger position is past the start is primed first
// (its parser re-reads what was counted, charging nothing), so repeats and
// Codex's running totals are known.
func (w *usageWatch) readRecord(harness, home, path string) []usage.Turn {
	tl := w.tails[path]
	if tl == nil {
		var err error
		pos := w.ledger.Position(path)
		tl, err = usage.NewTail(harness, home, path, usage.Position{})
		if err != nil {
			return nil
		}
		if pos.Offset > 0 {
			if err := tl.Prime(pos); err != nil {
				return nil
			}
		}
		w.tails[path] = tl
	}
	turns, err := tl.Read()
	if err != nil {
		return nil
	}
	w.ledger.SetPosition(path, tl.Pos)
	return turns
}

func (w *usageWatch) save() error {
	w.ledger.SetExtra(w.marks.encode())
	// A record no longer there is not read again.
	w.ledger.PrunePositions(func(path string) bool {
		if _, ok := w.tails[path]; ok {
			return true
		}
		_, err := os.Lstat(path)
		return err == nil
	})
	if err := w.ledger.Save(); err != nil {
		return err
	}
	w.saved, w.dirty = w.d.deps.Clock.Now(), false
	return nil
}

// report answers GET /usage.
func (w *usageWatch) report(q api.UsageQuery) (api.UsageReport, error) {
	f := usage.Filter{Repository: q.Repository}
	if q.Item != "" {
		it, err := parseRef(q.Item)
		if err != nil {
			return api.UsageReport{}, err
		}
		f.Item = it.String()
	}
	rates := w.rates()
	rep, err := w.ledger.Report(f, q.By, rates)
	if err != nil {
		return rep, fmt.Errorf("%w: %v", errBadUsageQuery, err)
	}
	recs, _ := w.d.reg.List()
	for _, rec := range recs {
		if _, ok := usage.NewParser(rec.Harness); !ok && (f.Item == "" || rec.Item.String() == f.Item) {
			rep.Unknown = append(rep.Unknown, rec.Item.String()+" ("+rec.Harness+")")
		}
	}
	sort.Strings(rep.Unknown)
	if f.Item != "" {
		w.mu.Lock()
		rep.Budget = w.budgetOf(f.Item)
		w.mu.Unlock()
	}
	return rep, nil
}

func (w *usageWatch) rates() usage.Rates {
	w.d.svc.rl.policy.RLock()
	defer w.d.svc.rl.policy.RUnlock()
	return w.d.cfg.Usage.Rates
}

func (w *usageWatch) budget() loop.BudgetSettings {
	w.d.svc.rl.policy.RLock()
	defer w.d.svc.rl.policy.RUnlock()
	return w.d.cfg.Usage.Budget
}

// figure is an item's usage as the board shows it: its estimated cost, or
// its tokens when a model has no rate ("" when nothing was counted).
func (w *usageWatch) figure(ref string) string {
	t, cost, priced := w.ledger.Sum(usage.Filter{Item: ref}, w.rates())
	if t.Total() == 0 {
		return ""
	}
	if priced {
		return fmt.Sprintf("≈%s · %s tok", money(cost), humanTokens(t.Total()))
	}
	return humanTokens(t.Total()) + " tok · —"
}

func money(c float64) string { return fmt.Sprintf("$%.2f", c) }

func humanTokens(n int64) string {
	switch {
	case n >= 1_000_000:
		return fmt.Sprintf("%.1fM", float64(n)/1e6)
	case n >= 10_000:
		return fmt.Sprintf("%dk", n/1000)
	}
	return fmt.Sprint(n)
}

// tokenCollector exports the ledger as theloop_tokens_total{repository,
// node, harness, model, kind} at scrape time (no item label: its
// cardinality is the fleet's).
type tokenCollector struct{ w *usageWatch }

var descTokens = prometheus.NewDesc("theloop_tokens_total", "Tokens the agent sessions' harnesses recorded, by kind (docs/usage.md).",
	[]string{"repository", "node", "harness", "model", "kind"}, nil)

func (c tokenCollector) Describe(ch chan<- *prometheus.Desc) { ch <- descTokens }

func (c tokenCollector) Collect(ch chan<- prometheus.Metric) {
	type key struct{ repo, node, harness, model string }
	sums := map[key]usage.Tokens{}
	c.w.ledger.Each(func(k usage.Key, t usage.Tally) {
		kk := key{k.Repository, k.Node, k.Harness, k.Model}
		sums[kk] = sums[kk].Add(t.Tokens)
	})
	for k, t := range sums {
		for _, kind := range usage.Kinds {
			ch <- prometheus.MustNewConstMetric(descTokens, prometheus.CounterValue, float64(t.Of(kind)), k.repo, k.node, k.harness, k.model, string(kind))
		}
	}
}

// errBadUsageQuery marks a GET /usage query the ledger refuses.
var errBadUsageQuery = apiserver.ErrBadRequest

// usageFigure is ref's board figure ("" when usage is off or nothing was
// counted).
func usageFigure(u *atomic.Pointer[usageWatch], ref string) string {
	if w := u.Load(); w != nil {
		return w.figure(ref)
	}
	return ""
}

// Usage answers GET /usage and the MCP tool (usage off: 503).
func (d *Daemon) Usage(_ context.Context, q api.UsageQuery) (api.UsageReport, error) {
	w := d.usage.Load()
	if w == nil {
		return api.UsageReport{}, errUsageOff
	}
	return w.report(q)
}

var errUsageOff = errors.New("usage is not counted (usage ledger unavailable; see loopd's log)")

// ItemUsage implements dashboard.UsageSource: ref's usage per node (with
// its blocked attempts) and per session.
func (s *dashSource) ItemUsage(ctx context.Context, ref string) *dashboard.UsageView {
	w := s.d.usage.Load()
	if w == nil {
		return nil
	}
	byNode, err := w.report(api.UsageQuery{Item: ref, By: "node"})
	if err != nil || byNode.Total.Turns == 0 {
		return nil
	}
	bySession, _ := w.report(api.UsageQuery{Item: ref, By: "session"})
	var st *graph.State
	if item, err := workitem.Parse(ref); err == nil {
		if rec, err := s.d.reg.Get(item); err == nil {
			_, _, _, st = s.item(ctx, rec)
		}
	}
	v := &dashboard.UsageView{Note: usage.EstimateNote, Total: usageBar(byNode.Total, 0, 0)}
	var top int64
	for _, r := range byNode.Rows {
		top = max(top, r.Tokens.Total)
	}
	for _, r := range byNode.Rows {
		blocked := 0
		if st != nil {
			if rec := st.Record(r.Key); rec.LastBlock != "" || rec.Outcome == "block" {
				blocked = max(rec.Attempts-1, 1) // attempts count the entry too
			}
		}
		v.Rows = append(v.Rows, usageBar(r, top, blocked))
	}
	for _, r := range bySession.Rows {
		v.Sessions = append(v.Sessions, usageBar(r, 0, 0))
	}
	if b := byNode.Budget; b != nil && b.State != "ok" {
		v.Budget = fmt.Sprintf("budget: %s — %s %.0f of %.0f (%s)", b.State, b.Unit, b.Used, b.Limit, b.Scope)
		if b.Reason != "" {
			v.Budget += ": " + b.Reason
		}
	}
	return v
}

func usageBar(r api.UsageRow, top int64, blocked int) dashboard.UsageBar {
	b := dashboard.UsageBar{Node: r.Key, Tokens: r.Tokens.Total, TokensText: humanTokens(r.Tokens.Total), Turns: r.Turns, Cost: "—", Blocked: blocked}
	if r.Cost != nil {
		b.Cost = "≈" + money(*r.Cost)
	}
	if top > 0 {
		b.Percent = int(200 * r.Tokens.Total / top)
	}
	return b
}

// Usage implements mcpserver.Operator.
func (o mcpOperator) Usage(ctx context.Context, q api.UsageQuery) (api.UsageReport, error) {
	return o.d.Usage(ctx, q)
}

// maxFleetRows bounds the metrics page's fleet view.
const maxFleetRows = 400

// FleetUsage implements dashboard.UsageSource.
func (s *dashSource) FleetUsage(context.Context) *dashboard.FleetUsage {
	w := s.d.usage.Load()
	if w == nil {
		return nil
	}
	rates := w.rates()
	type key struct{ day, repo string }
	type agg struct {
		t        usage.Tokens
		turns    int64
		cost     float64
		unpriced bool
	}
	sums := map[key]*agg{}
	w.ledger.Each(func(k usage.Key, t usage.Tally) {
		kk := key{k.Day, k.Repository}
		a := sums[kk]
		if a == nil {
			a = &agg{}
			sums[kk] = a
		}
		a.t, a.turns = a.t.Add(t.Tokens), a.turns+t.Turns
		c, ok := rates.Cost(k.Model, t.Tokens)
		a.cost += c
		a.unpriced = a.unpriced || !ok
	})
	if len(sums) == 0 {
		return nil
	}
	keys := make([]key, 0, len(sums))
	for k := range sums {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].day != keys[j].day {
			return keys[i].day > keys[j].day
		}
		return keys[i].repo < keys[j].repo
	})
	v := &dashboard.FleetUsage{Note: usage.EstimateNote}
	for _, k := range keys[:min(len(keys), maxFleetRows)] {
		a := sums[k]
		cost := "≈" + money(a.cost)
		if a.unpriced {
			cost = "—"
		}
		v.Rows = append(v.Rows, dashboard.FleetRow{Day: k.day, Repository: k.repo, Tokens: a.t.Total(), TokensText: humanTokens(a.t.Total()), Turns: a.turns, Cost: cost})
	}
	return v
}
