package daemon

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// DashboardConfig configures the dashboard loopd serves (package
// loop/dashboard). The zero value serves none.
type DashboardConfig struct {
	// Listen is the loopback host:port ("" = no dashboard; "127.0.0.1:0"
	// picks a port). The login file goes under the state root.
	Listen string
	// Operator is the GitHub login the gate buttons comment as, through
	// Deps.OperatorIntegrations; empty offers no actions.
	Operator string
	// StuckAfter is the metrics page's stuck threshold (default 24h).
	StuckAfter time.Duration
}

// titleTTL is how long a fetched ticket title is trusted before it is
// fetched again (an "issues edited" webhook refreshes it sooner).
const titleTTL = 10 * time.Minute

// maxTitleFetches bounds the ticket titles fetched at once. The board
// reads every tracked item's title, so a daemon that starts with a
// thousand items would otherwise open a thousand GitHub requests at once:
// GitHub answers that with its secondary rate limit (it asks for no more
// than 100 concurrent requests), and loopd paid ~8 MB for the goroutines
// and connections while they waited (TestIdleRSS, 1,000 items, no
// network: 834 goroutines, 750 of them title fetches).
const maxTitleFetches = 4

// liveTTL is how long a tmux liveness probe is reused by the board.
const liveTTL = 5 * time.Second

// dashSource is the dashboard's view of the daemon: the session registry
// (which work items are tracked), each checkout's graph-state.json and
// graph, tmux liveness, ticket titles (fetched once through integrations
// and cached) and the event log.
type dashSource struct {
	d *Daemon

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu       sync.Mutex
	titles   map[string]titleEntry
	fetching map[string]bool
	// titleQueue holds the refs waiting for a title fetch (each also in
	// fetching); titleWorkers is how many fetchers run (maxTitleFetches
	// at most).
	titleQueue   []string
	titleWorkers int
	last         map[string]lastEvent
	live         map[string]liveEntry
	// armed holds the work items the intake reported as armed with no
	// live session yet (noteIntake).
	armed map[string]armedEntry
	// asks caches the checkouts' open questions (attention.go).
	asks askCache
}

// armedEntry is what the intake last reported about a work item it knows
// is armed but has not got a live session for. It is kept in memory from
// this daemon's own events, seeded at start from the durable control
// records (seedArmed).
type armedEntry struct {
	state  dashboard.State
	reason string
	repo   string
	url    string
	at     time.Time
}

type titleEntry struct {
	title string
	at    time.Time
}

type lastEvent struct {
	name string
	at   time.Time
}

type liveEntry struct {
	live bool
	at   time.Time
}

var (
	_ dashboard.Source        = (*dashSource)(nil)
	_ dashboard.EventSearcher = (*dashSource)(nil)
)

func newDashSource(d *Daemon) *dashSource {
	ctx, cancel := context.WithCancel(context.Background())
	return &dashSource{d: d, ctx: ctx, cancel: cancel, titles: map[string]titleEntry{}, fetching: map[string]bool{}, last: map[string]lastEvent{}, live: map[string]liveEntry{}, armed: map[string]armedEntry{}}
}

// board is the board's reads beside the dashboard (mcpoperator.go).
func (d *Daemon) board() boardReads {
	return boardReads{host: d.dashHost, open: func() *dashSource { return newDashSource(d) }, now: d.deps.Clock.Now}
}

func (s *dashSource) close() {
	s.cancel()
	s.wg.Wait()
}

// startDashboard serves the dashboard when Config.Dashboard.Listen is set.
// The returned stop function is never nil.
func (d *Daemon) startDashboard() (func(), error) {
	if d.cfg.Dashboard.Listen == "" {
		return func() {}, nil
	}
	src := newDashSource(d)
	src.seedArmed()
	var poster dashboard.Poster
	if d.deps.OperatorIntegrations != nil {
		poster = d.deps.OperatorIntegrations
	}
	logw := d.deps.Log
	if logw == nil {
		logw = io.Discard
	}
	dash, err := dashboard.New(dashboard.Config{
		Listen: d.cfg.Dashboard.Listen, StateRoot: d.cfg.StateRoot,
		Operator: d.cfg.Dashboard.Operator, AuthorizedUsers: d.cfg.Routing.AuthorizedUsers, StuckAfter: d.cfg.Dashboard.StuckAfter,
		EventLog: d.cfg.EventLog.Path, Banner: d.worlds.undefendedWarning(), WebTerminal: d.cfg.Routing.WebTerminal,
	}, dashboard.Deps{Source: src, Poster: poster, Panes: dashPanes{d}, MayAct: d.desk.operatorMayAct, Now: d.deps.Clock.Now, Log: logw, Layout: dashboardLayout(d.deps.Path, d.cfg.StateRoot, d.logf),
		Settings: src.settings, SettingsNote: src.settingsNote, Scrub: d.scrub.String})
	if err != nil {
		src.close()
		return func() {}, err
	}
	if err := dash.Start(); err != nil {
		_ = dash.Close()
		src.close()
		return func() {}, err
	}
	return d.dashHost.serve(dash, src), nil
}

// dashHost holds the dashboard while it is served, and the dashboard's
// PR/CI state (prci.go): that lives here, not in the dashboard's source,
// so that what the start-up reconcile pass reads before the dashboard is
// up is kept.
type dashHost struct {
	// listen is Config.Dashboard.Listen ("" serves none: nothing is kept).
	listen string
	prci   dashboard.PRCI

	mu   sync.Mutex
	dash *dashboard.Dashboard
	src  *dashSource
}

// serve keeps dash and its source as the ones served until stop.
func (h *dashHost) serve(dash *dashboard.Dashboard, src *dashSource) (stop func()) {
	h.mu.Lock()
	h.dash, h.src = dash, src
	h.mu.Unlock()
	return func() {
		h.mu.Lock()
		h.dash, h.src = nil, nil
		h.mu.Unlock()
		_ = dash.Close()
		src.close()
	}
}

// served is the dashboard served and its source (nil, nil: none, as on a
// nil host).
func (h *dashHost) served() (*dashboard.Dashboard, *dashSource) {
	if h == nil {
		return nil, nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dash, h.src
}

// refresh tells the dashboard served, if any, that refs' rows may have
// changed.
func (h *dashHost) refresh(refs ...string) {
	if dash, _ := h.served(); dash != nil {
		for _, r := range refs {
			dash.Notify(r)
		}
	}
}

// DashboardURL is the dashboard's base URL ("" when none is served).
func (d *Daemon) DashboardURL() string {
	if dash, _ := d.dashHost.served(); dash != nil {
		return dash.URL()
	}
	return ""
}

// DashboardLoginURL mints a one-time login URL for the dashboard ("" when
// none is served). `loopctl dashboard` mints the same from the login file.
func (d *Daemon) DashboardLoginURL() string {
	if dash, _ := d.dashHost.served(); dash != nil {
		return dash.LoginURL()
	}
	return ""
}

// notify records the observation as the work item's last event
// and tells the dashboard its row may have changed.
func (h *dashHost) notify(o Observation) {
	dash, src := h.served()
	if dash == nil {
		return
	}
	if o.WorkItem == "" && o.Name == "dispatch.dead-lettered" {
		// The dispatcher's ordering key is the event's first work item.
		if k, _ := o.Fields["key"].(string); k != "" {
			if _, err := workitem.Parse(k); err == nil {
				o.WorkItem = k
			}
		}
	}
	if o.WorkItem != "" {
		name := o.Name
		if o.Kind == KindWebhook {
			name = "webhook " + o.Name
			if a, _ := o.Fields["action"].(string); a != "" {
				name += " " + a
			}
		}
		src.mu.Lock()
		src.last[o.WorkItem] = lastEvent{name: name, at: o.Time}
		if o.Kind == KindWebhook && o.Name == ingress.KindIssues {
			if a, _ := o.Fields["action"].(string); a == "edited" {
				delete(src.titles, o.WorkItem)
			}
		}
		src.noteIntake(o)
		src.mu.Unlock()
	}
	dash.Notify(o.WorkItem)
}

// seedArmed lists, once at start, the work items whose durable control
// record arms them (a start recorded, docs/daemon.md §5.3) but that have no
// session record: a start the daemon accepted and has not spawned, such as
// one whose spawn failed before a restart. What else noteIntake knows
// (awaiting a start, a spawn's error) is not durable and shows again at
// the item's next event.
func (s *dashSource) seedArmed() {
	if s.d.ctl == nil || s.d.reg == nil {
		return
	}
	refs, err := s.d.ctl.ps.ControlledRefs()
	if err != nil {
		return
	}
	for _, ref := range refs {
		if _, err := s.d.reg.Get(ref); err == nil {
			continue
		}
		c, err := s.d.ctl.ps.Control(ref)
		if err != nil || c == nil || !c.Command.Arms() {
			continue
		}
		reason := fmt.Sprintf("%s requested by %s (%s); no session yet", c.Command, c.Actor, c.Source)
		s.armed[ref.String()] = armedEntry{state: dashboard.StateQueued, reason: reason, repo: ref.Owner + "/" + ref.Repo, url: ref.URL(), at: parseStamp(c.RequestedAt)}
	}
}

// maxArmedRows bounds the armed-without-a-session rows kept in memory: a
// repository labelling thousands of tickets nobody starts must not grow
// the daemon without end. Past it the oldest report is forgotten (it comes
// back with the item's next event).
const maxArmedRows = 10_000

// forgetOldestArmed drops the armed row reported longest ago (under s.mu).
func (s *dashSource) forgetOldestArmed() {
	oldest, first := "", true
	var at time.Time
	for ref, e := range s.armed {
		if first || e.at.Before(at) {
			oldest, at, first = ref, e.at, false
		}
	}
	delete(s.armed, oldest)
}

// noteIntake records (under s.mu) what the observation says about an
// armed work item without a live session: a labeled event refused for
// want of a start command, a start command whose spawn is under way, a
// failed spawn, the dead letter of an event that was spawning. A spawn,
// a closed ticket or another control command forgets it.
func (s *dashSource) noteIntake(o Observation) {
	str := func(k string) string { v, _ := o.Fields[k].(string); return v }
	ref := o.WorkItem
	prev, had := s.armed[ref]
	set := func(st dashboard.State, reason string) {
		e := armedEntry{state: st, reason: reason, at: o.Time}
		if item, err := workitem.Parse(ref); err == nil {
			e.repo, e.url = item.Owner+"/"+item.Repo, item.URL()
		}
		if _, ok := s.armed[ref]; !ok && len(s.armed) >= maxArmedRows {
			s.forgetOldestArmed()
		}
		s.armed[ref] = e
	}
	switch o.Name {
	case "dispatch.dropped":
		if str("reason") == "awaiting-start" {
			set(dashboard.StateAwaitingStart, "armed; no session until a start command (the-loop start)")
		}
	case "control.command":
		switch str("effect") {
		case "spawn":
			by := str("actor")
			if by == "" {
				by = "the CLI"
			}
			set(dashboard.StateQueued, "start requested by "+by+"; spawning")
		case "handed-to-graph":
		default:
			delete(s.armed, ref)
		}
	case "session.spawn_failed":
		set(dashboard.StateSpawnFailed, str("error"))
	case "dispatch.dead-lettered":
		// Only an event the board already knew was spawning: a dead letter
		// of a delivery to a live session is no spawn.
		if had && (prev.state == dashboard.StateQueued || prev.state == dashboard.StateSpawnFailed) {
			reason := "dead-lettered"
			if e := str("error"); e != "" {
				reason += ": " + e
			} else if prev.reason != "" && prev.state == dashboard.StateSpawnFailed {
				reason += ": " + prev.reason
			}
			set(dashboard.StateSpawnFailed, reason)
		}
	case "dispatch.spawned", "session.spawned", "session.autoclosed":
		delete(s.armed, ref)
	case ingress.KindIssues, ingress.KindPullRequest:
		if o.Kind == KindWebhook && str("action") == "closed" {
			delete(s.armed, ref)
		}
	}
}

// Items lists every work item with a session record, and the armed ones
// without a live session (noteIntake).
func (s *dashSource) Items(ctx context.Context) ([]dashboard.Item, error) {
	recs, _ := s.d.reg.List()
	out := make([]dashboard.Item, 0, len(recs))
	seen := make(map[string]bool, len(recs))
	for _, rec := range recs {
		it, _, _, _ := s.item(ctx, rec)
		it.PullRequests = s.d.dashHost.prci.PullRequests(it.Ref)
		s.overlayArmed(&it, rec)
		seen[it.Ref] = true
		out = append(out, it)
	}
	type armed struct {
		ref string
		e   armedEntry
	}
	s.mu.Lock()
	var extra []armed
	for ref, e := range s.armed {
		if !seen[ref] {
			extra = append(extra, armed{ref, e})
		}
	}
	s.mu.Unlock()
	for _, a := range extra {
		out = append(out, s.armedItem(a.ref, a.e))
	}
	return out, nil
}

// armedItem is the row of an armed work item with no session record.
func (s *dashSource) armedItem(ref string, e armedEntry) dashboard.Item {
	it := dashboard.Item{Ref: ref, Repo: e.repo, URL: e.url, State: e.state, Finding: e.reason, Since: e.at}
	if item, err := workitem.Parse(ref); err == nil {
		it.Title = s.title(item)
	}
	s.mu.Lock()
	if le, ok := s.last[ref]; ok {
		it.LastEvent, it.LastEventAt = le.name, le.at
	}
	s.mu.Unlock()
	return it
}

// overlayArmed shows a record that is not live (closed) as armed again
// when the intake reported so after it closed.
func (s *dashSource) overlayArmed(it *dashboard.Item, rec sessions.Record) {
	if rec.Status.Live() {
		return
	}
	s.mu.Lock()
	e, ok := s.armed[it.Ref]
	s.mu.Unlock()
	if ok {
		it.State, it.Finding, it.Since = e.state, e.reason, e.at
	}
}

// item builds a row, returning the graph and state it read.
func (s *dashSource) item(ctx context.Context, rec sessions.Record) (dashboard.Item, *graph.Runtime, *graph.Graph, *graph.State) {
	ref := rec.Item.String()
	it := dashboard.Item{Ref: ref, Repo: rec.Item.Owner + "/" + rec.Item.Repo, URL: rec.Item.URL(), State: dashboard.StatePending}
	it.Title = s.title(rec.Item)
	s.mu.Lock()
	if le, ok := s.last[ref]; ok {
		it.LastEvent, it.LastEventAt = le.name, le.at
	}
	s.mu.Unlock()
	it.PendingTicketEffects = s.d.PendingTicketEffects(ref)
	it.Usage = usageFigure(&s.d.usage, ref) // usagewatch.go
	it.SessionLive = s.liveness(ctx, rec)
	if it.SessionLive {
		it.Attach = s.attach(rec)
	}

	id := rec.Item.SpecID()
	if id == "" || rec.Cwd == "" {
		return it, nil, nil, nil
	}
	st, err := loop.NewStore(rec.Cwd, s.d.link.specDir(rec.Cwd)).Load(ctx, id)
	if err != nil || st == nil || st.CurrentNode == "" {
		return it, nil, nil, nil
	}
	var rt *graph.Runtime
	var g *graph.Graph
	if s.d.cfg.Routing.GraphEnabled {
		if r, err := s.d.link.runtime(rec.Item, rec.Cwd, id); err == nil {
			rt, g = r, r.Graph()
		}
	}
	if g == nil && st.Loop != "" {
		g, _ = loop.ShippedGraph(st.Loop)
	}
	it.Node = st.CurrentNode
	it.Loop = st.Loop
	if g != nil {
		it.Loop = g.Name
	}
	nr := st.Record(st.CurrentNode)
	it.Since = parseStamp(nr.EnteredAt)
	var n *graph.Node
	if g != nil {
		n, _ = g.Node(st.CurrentNode)
	}
	if n != nil {
		it.Phase, it.Human = n.Phase, n.IsHuman()
	}
	parked := st.Parked != nil && st.Parked.Node == st.CurrentNode
	switch {
	case n != nil && n.Terminal && !(parked && st.Parked.Escalated) && nr.LastBlock == "":
		// At the terminal node the walk is done: loopd's recompute (and
		// check --recompute) has it complete; its exit chain, when it has
		// one, is bookkeeping.
		it.State = dashboard.StateDone
		it.Finished = parseStamp(nr.ExitedAt)
		if it.Finished.IsZero() {
			it.Finished = parseStamp(nr.EnteredAt)
		}
	case !rec.Status.Live():
		// The session was closed or stopped before the walk finished.
		it.State, it.Finished = dashboard.StateClosed, s.closedAt(rec)
	case parked && st.Parked.Escalated:
		it.State, it.Finding = dashboard.StateParked, st.Parked.Reason
	case it.Human:
		it.State = dashboard.StateWaiting
		if parked {
			it.Since = parseStamp(st.Parked.Since)
		}
	case parked:
		it.State, it.Finding = dashboard.StateParked, st.Parked.Reason
	case nr.LastBlock != "":
		it.State, it.Finding = dashboard.StateBlocked, nr.LastBlock
	default:
		it.State = dashboard.StateWorking
	}
	if it.Since.IsZero() {
		it.Since = parseStamp(nr.EnteredAt)
	}
	return it, rt, g, st
}

// closedAt is when a closed record was closed: its registry file's last
// change (the close is the last write a closed record gets, bar a pull
// request's link).
func (s *dashSource) closedAt(rec sessions.Record) time.Time {
	fi, err := os.Stat(filepath.Join(s.d.reg.Dir(), rec.Item.Slug()+".json"))
	if err != nil {
		return time.Time{}
	}
	return fi.ModTime()
}

func parseStamp(s string) time.Time {
	if s == "" {
		return time.Time{}
	}
	for _, layout := range []string{time.RFC3339Nano, sessions.TimeLayout} {
		if t, err := time.Parse(layout, s); err == nil {
			return t
		}
	}
	return time.Time{}
}

// liveness probes the record's tmux session, reusing a probe for liveTTL.
func (s *dashSource) liveness(ctx context.Context, rec sessions.Record) bool {
	if !rec.Status.Live() {
		return false
	}
	ref := rec.Item.String()
	now := time.Now()
	s.mu.Lock()
	if e, ok := s.live[ref]; ok && now.Sub(e.at) < liveTTL {
		s.mu.Unlock()
		return e.live
	}
	s.mu.Unlock()
	lv, _ := s.d.tmux.Probe(ctx, rec.TmuxName)
	// Unknown (tmux slow or busy): the registry's word stands.
	live := lv == sessions.LivenessLive || lv == sessions.LivenessUnknown
	s.mu.Lock()
	s.live[ref] = liveEntry{live: live, at: now}
	s.mu.Unlock()
	return live
}

// attach is the command that attaches to the record's tmux session.
func (s *dashSource) attach(rec sessions.Record) string {
	return s.d.tmux.AttachCommand(rec.TmuxName)
}

// title returns the cached ticket title and, when it is missing or old,
// fetches it in the background (the row updates when it arrives).
func (s *dashSource) title(item workitem.Ref) string {
	ref := item.String()
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.titles[ref]
	if (!ok || time.Since(e.at) > titleTTL) && !s.fetching[ref] && s.ctx.Err() == nil && s.d.integ != nil {
		s.fetching[ref] = true
		s.titleQueue = append(s.titleQueue, ref)
		if s.titleWorkers < maxTitleFetches {
			s.titleWorkers++
			s.wg.Add(1)
			go s.titleWorker()
		}
	}
	return e.title
}

// titleWorker fetches queued titles, oldest first, until the queue is
// empty or the dashboard closes.
func (s *dashSource) titleWorker() {
	defer s.wg.Done()
	for {
		s.mu.Lock()
		if len(s.titleQueue) == 0 || s.ctx.Err() != nil {
			for _, ref := range s.titleQueue {
				delete(s.fetching, ref)
			}
			s.titleQueue = nil
			s.titleWorkers--
			s.mu.Unlock()
			return
		}
		ref := s.titleQueue[0]
		s.titleQueue[0] = ""
		s.titleQueue = s.titleQueue[1:]
		s.mu.Unlock()
		s.fetchTitle(ref)
	}
}

func (s *dashSource) fetchTitle(ref string) {
	ctx, cancel := context.WithTimeout(s.ctx, 15*time.Second)
	defer cancel()
	res, err := s.d.integ.Call(ctx, ops.GitHubGetIssue, map[string]any{"ref": ref})
	title, _ := res["title"].(string)
	s.mu.Lock()
	delete(s.fetching, ref)
	old := s.titles[ref]
	if err == nil {
		s.titles[ref] = titleEntry{title: title, at: time.Now()}
	} else {
		s.titles[ref] = titleEntry{title: old.title, at: time.Now()} // retry after titleTTL
	}
	s.mu.Unlock()
	if err == nil && title != old.title {
		s.d.dashHost.refresh(ref)
	}
}

// Detail reads one work item's page data.
func (s *dashSource) Detail(ctx context.Context, ref string) (*dashboard.Detail, error) {
	item, err := workitem.Parse(ref)
	if err != nil {
		return nil, dashboard.ErrNotFound
	}
	rec, err := s.d.reg.Get(item)
	if err != nil {
		s.mu.Lock()
		e, ok := s.armed[item.String()]
		s.mu.Unlock()
		if !ok {
			return nil, dashboard.ErrNotFound
		}
		it := s.armedItem(item.String(), e)
		it.PullRequests = s.d.dashHost.prci.PullRequests(it.Ref)
		return &dashboard.Detail{Item: it}, nil
	}
	it, rt, g, st := s.item(ctx, rec)
	it.PullRequests = s.d.dashHost.prci.PullRequests(it.Ref)
	s.overlayArmed(&it, rec)
	det := &dashboard.Detail{Item: it, Graph: g, State: st}
	if st == nil || g == nil {
		return det, nil
	}
	id := item.SpecID()
	if rt != nil {
		if vs, err := rt.VerifyDecisions(ctx, id); err == nil {
			det.Decisions = vs
		}
		if rep, err := rt.Status(ctx, id, false); err == nil {
			if nr, ok := rep.Node(st.CurrentNode); ok {
				det.Messages = nr.Messages
			}
		}
	}
	if len(det.Messages) == 0 {
		if lb := st.Record(st.CurrentNode).LastBlock; lb != "" {
			det.Messages = strings.Split(lb, "\n")
		}
	}
	specDir := s.d.link.specDir(rec.Cwd)
	for _, n := range g.Nodes() {
		skipped := skippedNode(st, n.ID, it.State == dashboard.StateDone)
		for _, entry := range n.Produces {
			// "requirements.md|bugfix.md": one of them is the node's
			// artifact; once one is written the others are no gap.
			var alts []dashboard.Artifact
			chosen := ""
			for _, name := range strings.Split(entry, "|") {
				if name = strings.TrimSpace(name); name == "" {
					continue
				}
				rel := filepath.ToSlash(filepath.Join(specDir, id, name))
				a := dashboard.Artifact{Node: n.ID, Name: name, Path: rel, Skipped: skipped}
				if filepath.IsLocal(filepath.FromSlash(rel)) { // never read outside the checkout
					a.Exists, a.Locked, a.ApprovedBy = readLock(filepath.Join(rec.Cwd, filepath.FromSlash(rel)))
				}
				if a.Exists && chosen == "" {
					chosen = name
				}
				alts = append(alts, a)
			}
			for _, a := range alts {
				if !a.Exists && len(alts) > 1 {
					a.Instead = chosen
				}
				det.Artifacts = append(det.Artifacts, a)
			}
		}
	}
	return det, nil
}

// skippedNode reports a node the walk does not produce for: declared
// skipped (a phase selection), recorded as skipped, or — once the walk is
// done — never entered (an alternative route it did not take).
func skippedNode(st *graph.State, node string, done bool) bool {
	if _, declared := st.Skips.Get(node); declared {
		return true
	}
	rec := st.Record(node)
	return rec.Outcome == graph.OutcomeSkipped || done && rec.EnteredAt == ""
}

// maxArtifactRead bounds what the dashboard reads of an artifact (agent
// written, hence hostile) to find its front matter.
const maxArtifactRead = 1 << 20

// readLock reports whether the artifact exists and its front matter's
// lock. A symlink is not followed.
func readLock(path string) (exists, locked bool, by []string) {
	fi, err := os.Lstat(path)
	if err != nil || !fi.Mode().IsRegular() {
		return false, false, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return true, false, nil
	}
	defer f.Close()
	b, _ := io.ReadAll(io.LimitReader(f, maxArtifactRead))
	fm, _ := hooks.FrontMatter(string(b))
	st, _ := fm["status"].(string)
	if strings.TrimSpace(st) != "approved" {
		return true, false, nil
	}
	switch v := fm["approvedBy"].(type) {
	case []any:
		for _, x := range v {
			if s, ok := x.(string); ok {
				by = append(by, s)
			}
		}
	case string:
		by = []string{v}
	}
	return true, true, by
}

// Events reads loopd's own event log: one stream (docs/decisions.md §24).
// Every transition of an agent's claim is in it already, as loopd's
// recompute bore it out (recompute.go); the log in a work item's checkout
// is the agent's word and is read by nobody here, so the board, the item
// page, the metrics page, /metrics (fed from the same sink) and `loopctl
// events` agree.
func (s *dashSource) Events(ctx context.Context, ref string, since time.Time, limit int) ([]dashboard.Event, error) {
	return s.read(loop.EventQuery{WorkItem: ref, Since: since, Limit: limit})
}

// SearchEvents answers the Events page's query over the same log, its
// filters applied as the log is read (dashboard.EventSearcher).
func (s *dashSource) SearchEvents(ctx context.Context, q dashboard.EventQuery) ([]dashboard.Event, error) {
	return s.read(loop.EventQuery{WorkItem: q.Item, Event: q.Kind, Since: q.Since, Until: q.Until, Limit: q.Limit})
}

func (s *dashSource) read(q loop.EventQuery) ([]dashboard.Event, error) {
	var recs []loop.EventRecord
	if s.d.cfg.EventLog.Path != "" {
		s.d.FlushLogs()
		own, err := loop.MergeEvents([]string{s.d.cfg.EventLog.Path}, q)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		recs = own
	}
	out := make([]dashboard.Event, 0, len(recs))
	for _, r := range recs {
		e := dashboard.Event{Time: r.Time, Name: r.Event, Fields: make(map[string]any, len(r.Fields)+1)}
		if r.Source != "" && r.Source != "loopd" {
			e.Fields["source"] = r.Source // a claim's loopctl, not loopd
		}
		for _, f := range r.Fields {
			if f.Key == "work_item" {
				e.WorkItem, _ = f.Value.(string)
				continue
			}
			e.Fields[f.Key] = f.Value
		}
		out = append(out, e)
	}
	return out, nil
}

// shownSettings is the settings as one reload read them from the file:
// the rows, when, and the keys that reload could not apply (they run with
// their earlier values until a restart).
type shownSettings struct {
	rows    []loop.ShownSetting
	at      time.Time
	pending []string
}

// settingsNote is the Settings page's line about the last reload ("" when
// there was none).
func (s *dashSource) settingsNote() string {
	v := s.d.shown.Load()
	if v == nil {
		return ""
	}
	note := "Reloaded at " + v.at.UTC().Format("2006-01-02 15:04:05 UTC") + ": the values below are the file's as that reload read them."
	if len(v.pending) > 0 {
		note += " Not applied until loopd restarts (these still run with their earlier values): " + strings.Join(v.pending, "; ") + "."
	}
	return note
}

// settings are the Settings page's rows: the resolved settings
// as `loopctl config show` prints them — as loopd started, or as its last
// reload read them — and whether each variable a credential is read from
// is set (never its value).
func (s *dashSource) settings() []dashboard.Setting {
	d := s.d
	shown := d.cfg.Settings.Shown()
	if v := d.shown.Load(); v != nil {
		shown = v.rows
	}
	rows := make([]dashboard.Setting, 0, len(shown)+len(d.cfg.SecretEnvNames))
	for _, r := range shown {
		rows = append(rows, dashboard.Setting{Key: r.Key, Value: r.Value, Source: string(r.Source)})
	}
	seen := map[string]bool{}
	for _, name := range d.cfg.SecretEnvNames {
		if name == "" || seen[name] {
			continue
		}
		seen[name] = true
		state := "(unset)"
		if d.deps.Env != nil {
			if v, ok := d.deps.Env(name); ok && v != "" {
				state = "(set)"
			}
		}
		rows = append(rows, dashboard.Setting{Key: "$" + name, Value: state, Source: string(loop.SourceEnv)})
	}
	return rows
}

// operatorMayAct is the dashboard's question (dashboard.Deps.MayAct): ""
// when login may act on ref by the rules a ticket's keyword is held to.
func (o *operatorDesk) operatorMayAct(ctx context.Context, login, ref string) string {
	item, err := parseRef(ref)
	if err != nil {
		return err.Error()
	}
	o.policy.RLock()
	defer o.policy.RUnlock()
	if _, err := o.authorizedOperator(ctx, "github:"+login, "act", item); err != nil {
		return err.Error()
	}
	return ""
}
