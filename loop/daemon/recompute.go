package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/outbox"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// loopd trusts no state the agent wrote (docs/decisions.md §23).
//
// graph-state.json lives in the checkout, which is the agent's to write:
// its pointer, parking, forced flags and decisions are the agent's word.
// So every time loopd acts on a work item because of something a session
// did — a claim in its outbox, a paste, the context of a spawn — it first
// recomputes the item from the checkout's artifacts (graph.Runtime.Status
// with recompute, the check `loopctl check --recompute` runs) under its own
// trust anchor: the runtime's verifier trusts loopd's decision-signing key
// and nothing else, so a decision whose signature does not verify under it
// counts for nothing. The recompute's current node is the first node whose
// exit chain does not pass; the artifacts are read bounded, as regular
// files, never through a link that leaves the checkout
// (refuseLinksOut).
//
// What loopd does follows from that recompute alone:
//   - the ticket's phase label is loop:<phase of the recomputed current
//     node>, set when that node changes; entering a human gate posts its
//     review request;
//   - an assignment is pasted only for the recomputed current node, or a
//     node before it (a gate's changes-requested routes back) — never for a
//     node the recompute has not reached;
//   - the graph lines of loopd's own event log (graph.advanced,
//     graph.blocked, graph.escalated, graph.completed) for the agent's
//     claims are the transitions loopd observes between its previous
//     recompute of the item (kept under the state root, observedLoop) and
//     this one; a block is a claim whose node the recompute does not pass.
//
// A claim that disagrees with the recompute is refused and logged with what
// it asked and what the recompute says.

// recomputeSource marks the graph lines loopd derives from its recompute.
const recomputeSource = "recompute"

// observedDirName is where loopd keeps what its last recompute of each
// loop said, under the state root (out of every session's reach).
const observedDirName = "graph-observed"

// EventClaimRefused is a claim (or a pointer) loopd's recompute does not
// bear out, outside the outbox (a paste, a gate event).
const EventClaimRefused = "graph.claim_refused"

// observedLoop is what loopd's previous recompute of one loop said.
type observedLoop struct {
	// Current is the recomputed current node.
	Current string `json:"current"`
	// Effected is the node whose ticket effects (phase label, review
	// request) are on the ticket: performed by loopd from a recompute, or
	// by loopd's own runtime entering it. It trails Current when a
	// recompute after loopd's own verb saw a claim's transition first.
	Effected string `json:"effected,omitempty"`
	// Passed are the nodes before it that passed, in the graph's order.
	Passed []string `json:"passed"`
	// Completed is set once a claim of the terminal node was borne out.
	Completed bool `json:"completed,omitempty"`
	// LastBlock is the last verified block message per node: the same
	// block twice in a row escalates (docs/decisions.md §3).
	LastBlock map[string]string `json:"lastBlock,omitempty"`
}

// recomputed is one recompute of a loop under loopd's trust anchor.
type recomputed struct {
	g   *graph.Graph
	rep *graph.Report
	cur *graph.Node
}

func (r *recomputed) node(id string) graph.NodeReport {
	nr, _ := r.rep.Node(id)
	return nr
}

// passed lists the nodes before the current one that passed.
func (r *recomputed) passed() []string {
	var out []string
	for _, nr := range r.rep.Nodes {
		if nr.Node == r.cur.ID {
			break
		}
		if nr.Status == graph.StatusPass {
			out = append(out, nr.Node)
		}
	}
	return out
}

// beyond reports whether node is further than the recompute has reached.
func (r *recomputed) beyond(node string) bool { return r.g.Before(r.cur.ID, node) }

// complete: the terminal node is current and passes — the walk is done.
func (r *recomputed) complete() bool {
	return r.cur.Terminal && r.node(r.cur.ID).Status == graph.StatusPass
}

// recompute derives the loop's position from its artifacts alone.
func (l *graphLink) recompute(ctx context.Context, rt *graph.Runtime, id, cwd string) (*recomputed, error) {
	if err := refuseLinksOut(cwd, filepath.Join(cwd, filepath.FromSlash(l.specDir(cwd)), id)); err != nil {
		return nil, err
	}
	rep, err := rt.Status(ctx, id, true)
	if err != nil {
		return nil, err
	}
	g := rt.Graph()
	cur, ok := g.Node(rep.CurrentNode)
	if !ok {
		return nil, fmt.Errorf("the recompute's current node %q is not in %s", rep.CurrentNode, g.Name)
	}
	return &recomputed{g: g, rep: rep, cur: cur}, nil
}

// maxSpecEntries bounds the walk over a spec directory.
const maxSpecEntries = 4096

// errLinkOut: an entry of a spec directory is a link that leaves the
// checkout. loopd reads the agent's files with its own rights; a link
// planted in the checkout must not make it read one of its own.
var errLinkOut = errors.New("a link leaves the checkout")

// refuseLinksOut walks the spec directory dir (bounded) and refuses a
// symbolic link that resolves outside root, and a regular file with more
// than one hard link (a hard link to a file the agent cannot read is a way
// to have loopd read it). A missing directory is not an error.
func refuseLinksOut(root, dir string) error {
	realRoot, err := filepath.EvalSymlinks(root)
	if err != nil {
		return err
	}
	n := 0
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if n++; n > maxSpecEntries {
			return fmt.Errorf("%s holds more than %d entries", dir, maxSpecEntries)
		}
		switch {
		case d.Type()&fs.ModeSymlink != 0:
			target, err := filepath.EvalSymlinks(p)
			if err != nil {
				return nil // dangling: reads fail on their own
			}
			if rel, err := filepath.Rel(realRoot, target); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				return fmt.Errorf("%w: %s", errLinkOut, p)
			}
		case d.Type().IsRegular():
			if fi, err := d.Info(); err == nil && hardLinks(fi) > 1 {
				return fmt.Errorf("%w: %s has %d hard links", errLinkOut, p, hardLinks(fi))
			}
		}
		return nil
	})
	return err
}

// loopOf finds the loop a session's intent is about: the work item's own
// loop, or a pull request's inner loop (rooted at the work item's
// checkout).
func (l *graphLink) loopOf(sessionID string, ref workitem.Ref) (item, pr workitem.Ref, cwd string, err error) {
	rec, err := l.reg.BySessionID(sessionID)
	if errors.Is(err, sessions.ErrNoRecord) {
		rec, err = l.reg.Get(ref)
	}
	if err != nil {
		return item, pr, "", err
	}
	switch {
	case rec.Item == ref && rec.Parent.IsZero():
		return ref, workitem.Ref{}, rec.Cwd, nil
	case rec.Item == ref: // a pull request's own session
		parent, err := l.reg.Get(rec.Parent)
		if err != nil {
			return item, pr, "", err
		}
		return rec.Parent, ref, parent.Cwd, nil
	case rec.Parent == ref:
		parent, err := l.reg.Get(ref)
		if err != nil {
			return item, pr, "", err
		}
		return ref, workitem.Ref{}, parent.Cwd, nil
	}
	for _, link := range rec.PullRequests {
		if link.PR == ref {
			return rec.Item, ref, rec.Cwd, nil
		}
	}
	return item, pr, "", fmt.Errorf("%s is not a loop of session %s", ref, sessionID)
}

// claimSettle is how long the recompute waits before it looks again at a
// claim it would refuse (a file read while the agent was rewriting it).
const claimSettle = 300 * time.Millisecond

// judge is the outbox's Judge: a claim is a request; the recompute says
// what follows from it.
func (l *graphLink) judge(ctx context.Context, in loop.Intent) (outbox.Verdict, error) {
	ref, err := workitem.Parse(in.WorkItem)
	if err != nil {
		return outbox.Verdict{Refused: "not a work item ref"}, nil
	}
	item, pr, cwd, err := l.loopOf(in.Session, ref)
	if err != nil {
		return outbox.Verdict{Refused: "loopd cannot tell which loop the claim is about: " + err.Error()}, nil
	}
	rt, id, err := l.guard(ctx, actAdvance, item, pr, cwd)
	var s skip
	if errors.As(err, &s) {
		return outbox.Verdict{Refused: "loopd does not walk this work item's graph here (" + s.reason + ")"}, nil
	}
	if err != nil {
		return outbox.Verdict{}, err
	}
	rc, err := l.recompute(ctx, rt, id, cwd)
	if errors.Is(err, errLinkOut) {
		return outbox.Verdict{Refused: "loopd does not read this checkout: " + err.Error()}, nil
	}
	if err != nil {
		return outbox.Verdict{}, err
	}
	key := observedKey(item, pr)
	prev := l.loadObserved(key)

	v := outbox.Verdict{Fields: recomputeFields(rc)}
	var events []pendingEvent
	claimed := ""
	if in.Op == loop.IntentClaim {
		c := in.Claim()
		claimed = c.Node
		v.Fields = append(v.Fields, askedFields(c)...)
		var evs []pendingEvent
		v.Refused, evs = l.weigh(in, c, rc, prev)
		if v.Refused != "" {
			// A claim made right after a write can meet the file half
			// written (an editor, or a harness, that truncates and
			// rewrites in place): the recompute looks once more, after the
			// writes have settled, before it refuses.
			select {
			case <-ctx.Done():
				return outbox.Verdict{}, ctx.Err()
			case <-time.After(claimSettle):
			}
			if again, err := l.recompute(ctx, rt, id, cwd); err == nil {
				rc = again
				v.Fields = append(recomputeFields(rc), askedFields(c)...)
				v.Refused, evs = l.weigh(in, c, rc, prev)
			}
		}
		events = append(events, evs...)
	}
	v.Effects = l.derive(in.WorkItem, id, rc, prev, events)
	v.Done = func() { l.commitObserved(key, in.WorkItem, rc, events, claimed, in.ID, rc.cur.ID) }
	return v, nil
}

// pendingEvent is a graph line loopd logs once the claim is answered.
type pendingEvent struct {
	name   string
	level  graph.Level
	fields []graph.Field
	// block is the verified block message a graph.blocked records (for
	// the escalation rule); complete marks a borne-out terminal claim.
	block    string
	node     string
	complete bool
}

func askedFields(c loop.Claim) []graph.Field {
	f := []graph.Field{{Key: "asked_node", Value: c.Node}, {Key: "asked_status", Value: c.Status}}
	if c.To != "" {
		f = append(f, graph.Field{Key: "asked_to", Value: c.To})
	}
	return f
}

func recomputeFields(rc *recomputed) []graph.Field {
	nr := rc.node(rc.cur.ID)
	f := []graph.Field{{Key: "recomputed_node", Value: rc.cur.ID}, {Key: "recomputed_status", Value: string(nr.Status)}}
	if nr.Status != graph.StatusPass && len(nr.Messages) > 0 {
		f = append(f, graph.Field{Key: "recomputed_message", Value: clipText(strings.Join(nr.Messages, "; "), 500)})
	}
	return f
}

// weigh compares a claim with the recompute. It returns the refusal ("":
// borne out) and the graph lines the claim itself gives: a block (the
// recompute does not pass the claimed node), an escalation (the same
// block twice in a row), a completion.
func (l *graphLink) weigh(in loop.Intent, c loop.Claim, rc *recomputed, prev observedLoop) (string, []pendingEvent) {
	n, ok := rc.g.Node(c.Node)
	if !ok {
		return fmt.Sprintf("the claim names node %q, which is not in %s", c.Node, rc.g.Name), nil
	}
	nr := rc.node(n.ID)
	base := []graph.Field{{Key: "work_item", Value: in.WorkItem}, {Key: "node", Value: n.ID}, {Key: "basis", Value: recomputeSource}, {Key: "intent", Value: in.ID}}
	claimsPass := c.Status == loop.ClaimPassed || c.Status == loop.ClaimCompleted
	switch {
	case n.ID == rc.cur.ID && rc.complete():
		if !claimsPass {
			return "", nil
		}
		if prev.Completed {
			return "", nil
		}
		return "", []pendingEvent{{name: graph.EventCompleted, level: graph.LevelInfo, fields: base, node: n.ID, complete: true}}
	case rc.g.Before(n.ID, rc.cur.ID) && (nr.Status == graph.StatusPass || nr.Status == graph.StatusSkip):
		if claimsPass {
			return "", nil // its graph.advanced is the transition the recompute observes
		}
		// The agent's runtime blocked; the node passes by now (fixed before
		// loopd looked). What can still be checked is checked: the node was
		// reached, and the hook it names is one of the node's exit chain.
		// The block itself is the claim's word: the line says so.
		if c.Hook != "" && !hasHook(n.Exit, c.Hook) {
			return fmt.Sprintf("the claim says %s was blocked by %s, which is not a hook of its exit chain", n.ID, c.Hook), nil
		}
		f := append(slices.Clone(base), graph.Field{Key: "verified", Value: false}, graph.Field{Key: "recomputed", Value: "the node passes now"})
		if c.Hook != "" {
			f = append(f, graph.Field{Key: "hook", Value: c.Hook})
		}
		return "", []pendingEvent{{name: graph.EventBlocked, level: graph.LevelInfo, fields: f, node: n.ID}}
	case n.ID == rc.cur.ID && nr.Status == graph.StatusBlock && !n.IsHuman():
		msg := clipText(strings.Join(nr.Messages, "; "), 2000)
		f := append(slices.Clone(base), graph.Field{Key: "verified", Value: true}, graph.Field{Key: "message", Value: msg})
		// The hook is the claim's word (a report names none); the block
		// and its message are the recompute's.
		if h := blockingHook(nr); h != "" {
			f = append(f, graph.Field{Key: "hook", Value: h})
		} else if c.Hook != "" {
			f = append(f, graph.Field{Key: "hook", Value: c.Hook})
		}
		evs := []pendingEvent{{name: graph.EventBlocked, level: graph.LevelInfo, fields: f, block: msg, node: n.ID}}
		if prev.LastBlock[n.ID] == msg {
			evs = append(evs, pendingEvent{name: graph.EventEscalated, level: graph.LevelWarning, fields: append(slices.Clone(base), graph.Field{Key: "repeated", Value: true}), node: n.ID, block: msg})
		}
		refused := ""
		if claimsPass {
			refused = fmt.Sprintf("the claim says %s passed; loopd's recompute blocks it: %s", n.ID, msg)
		}
		return refused, evs
	case n.ID == rc.cur.ID:
		return fmt.Sprintf("the claim says %s %s; loopd's recompute has it %s", n.ID, c.Status, nr.Status), nil
	default:
		return fmt.Sprintf("the claim is about %s, which loopd's recompute has not reached: the work item is at %s (%s)%s", n.ID, rc.cur.ID, nr.Status, messageSuffix(rc)), nil
	}
}

func messageSuffix(rc *recomputed) string {
	nr := rc.node(rc.cur.ID)
	if nr.Status == graph.StatusPass || len(nr.Messages) == 0 {
		return ""
	}
	return ": " + clipText(strings.Join(nr.Messages, "; "), 300)
}

// blockingHook names the hook a recomputed node's first message comes
// from ("hook: text"), when the message says.
func blockingHook(nr graph.NodeReport) string {
	for _, m := range nr.Messages {
		if h, _, ok := strings.Cut(m, ":"); ok && h != "" && !strings.ContainsAny(h, " \t") {
			return h
		}
	}
	return ""
}

// derive gives the ticket effects of the recompute against the previous
// one: the phase label of a newly current node, its review request when it
// is a human gate, and an escalation's comment and label. ref is the
// loop's ticket, id its spec id.
func (l *graphLink) derive(ref, id string, rc *recomputed, prev observedLoop, claim []pendingEvent) []outbox.Effect {
	var effects []outbox.Effect
	if rc.cur.ID != prev.Effected {
		if rc.cur.Phase != "" && hasHook(rc.cur.Entry, "set-phase-label") && !samePhase(rc.g, prev.Effected, rc.cur) {
			label := loop.IntentLabelPrefix + rc.cur.Phase
			effects = append(effects, outbox.Effect{Op: ops.GitHubSetLabels, Summary: "label " + label,
				Args: map[string]any{"ref": ref, "labels": []any{label}, "replacePrefix": loop.IntentLabelPrefix}})
		}
		if rc.cur.IsHuman() && hasHook(rc.cur.Entry, "request-review") && rc.node(rc.cur.ID).Status != graph.StatusPass {
			effects = append(effects, outbox.Effect{Op: ops.GitHubAddComment, Summary: "review request for " + rc.cur.ID,
				Args: map[string]any{"ref": ref, "body": hooks.Mark(hooks.ReviewRequestComment(rc.cur.ID, id))}})
		}
	}
	for _, e := range claim {
		if e.name != graph.EventEscalated {
			continue
		}
		label := loop.IntentLabelPrefix + "escalated"
		body := hooks.EscalationComment(id, &graph.Parked{Node: e.node, Reason: e.block, Escalated: true})
		effects = append(effects,
			outbox.Effect{Op: ops.GitHubAddComment, Summary: "escalation of " + e.node, Args: map[string]any{"ref": ref, "body": hooks.Mark(body)}},
			outbox.Effect{Op: ops.GitHubSetLabels, Summary: "label " + label, Args: map[string]any{"ref": ref, "labels": []any{label}}})
	}
	return effects
}

// samePhase: the node loopd last had as current carries cur's phase
// label already (a gate carries its producer's phase).
func samePhase(g *graph.Graph, prev string, cur *graph.Node) bool {
	p, ok := g.Node(prev)
	return ok && p.Phase == cur.Phase && hasHook(p.Entry, "set-phase-label")
}

func hasHook(hs []graph.BoundHook, name string) bool {
	return slices.ContainsFunc(hs, func(h graph.BoundHook) bool { return h.Name == name })
}

// commitObserved keeps what the recompute rc said of the loop key and then
// logs (state first) the transitions since the record it replaces — one
// graph.advanced per node newly passed — and the claim's own lines.
// effected is the node whose ticket effects are now on the ticket (""
// leaves the record's); except names a node whose transition the caller's
// own runtime already logged.
func (l *graphLink) commitObserved(key, ref string, rc *recomputed, claim []pendingEvent, claimed, intent, effected string, except ...string) {
	l.obsMu.Lock()
	defer l.obsMu.Unlock()
	prev := l.loadObserved(key)
	if effected == "" {
		effected = prev.Effected
	}
	next := observedLoop{Current: rc.cur.ID, Effected: effected, Passed: rc.passed(), Completed: prev.Completed, LastBlock: map[string]string{}}
	for k, v := range prev.LastBlock {
		if k == rc.cur.ID { // a block counts only while its node stays current
			next.LastBlock[k] = v
		}
	}
	for _, e := range claim {
		if e.name == graph.EventBlocked && e.block != "" {
			next.LastBlock[e.node] = e.block
		}
		if e.complete {
			next.Completed = true
		}
	}
	if !rc.complete() {
		next.Completed = false
	}
	var lines []pendingEvent
	walk := append(slices.Clone(next.Passed), rc.cur.ID)
	for i, n := range next.Passed {
		if slices.Contains(prev.Passed, n) || slices.Contains(except, n) {
			continue
		}
		if nd, ok := rc.g.Node(n); ok && nd.IsHuman() {
			// A gate passes only by loopd's own runtime deciding it (an
			// authorized event), which logs its graph.advanced itself: a
			// claim judged between that step and its rebase sees the gate
			// passed and must not log it a second time (one stream, one
			// line per transition).
			continue
		}
		f := []graph.Field{{Key: "work_item", Value: ref}, {Key: "node", Value: n}, {Key: "to", Value: walk[i+1]},
			{Key: "outcome", Value: rc.node(n).Outcome}, {Key: "basis", Value: recomputeSource}}
		if n == claimed && intent != "" {
			f = append(f, graph.Field{Key: "intent", Value: intent})
		}
		lines = append(lines, pendingEvent{name: graph.EventAdvanced, level: graph.LevelInfo, fields: f})
	}
	if err := l.saveObserved(key, next); err != nil {
		l.logf("keeping loopd's recompute of %s: %v", ref, err)
	}
	for _, e := range append(lines, claim...) {
		l.record(e.name, e.level, e.fields...)
	}
}

// rebase recomputes a loop after loopd's own runtime stepped it (a gate
// decided by an event, a start) and keeps what it says, logging the
// transitions the agent's claims made that loopd has not logged yet. When
// the step moved, the node it left was logged by the runtime itself and
// the node it entered had its entry chain (its ticket effects) run by it;
// entered is also set for a start seen for the first time.
func (l *graphLink) rebase(ctx context.Context, rt *graph.Runtime, item, pr workitem.Ref, cwd, id string, step *graph.StepReport, start bool) {
	rc, err := l.recompute(ctx, rt, id, cwd)
	if err != nil {
		return
	}
	ref := item.String()
	if !pr.IsZero() {
		ref = pr.String()
	}
	key := observedKey(item, pr)
	var entered string
	var except []string
	switch {
	case step != nil && step.Moved:
		entered, except = step.CurrentNode, []string{step.Node}
	case start && step != nil && l.loadObserved(key).Effected == "":
		entered = step.CurrentNode
	}
	l.commitObserved(key, ref, rc, nil, "", "", entered, except...)
}

func observedKey(item, pr workitem.Ref) string {
	sum := sha256.Sum256([]byte(item.String() + "\x00" + pr.String()))
	return hex.EncodeToString(sum[:12])
}

func (l *graphLink) loadObserved(key string) observedLoop {
	l.obsCacheMu.Lock()
	defer l.obsCacheMu.Unlock()
	if o, ok := l.observed[key]; ok {
		return o
	}
	var o observedLoop
	if l.observedDir != "" {
		if data, err := os.ReadFile(filepath.Join(l.observedDir, key+".json")); err == nil {
			_ = json.Unmarshal(data, &o)
		}
	}
	l.observed[key] = o
	return o
}

// equal reports whether two records say the same (a nil map or slice is
// an empty one).
func (o observedLoop) equal(p observedLoop) bool {
	return o.Current == p.Current && o.Effected == p.Effected && o.Completed == p.Completed &&
		slices.Equal(o.Passed, p.Passed) && maps.Equal(o.LastBlock, p.LastBlock)
}

// saveObserved writes the record atomically (temp file, fsync, rename),
// unless it says what the record on disk says: a comment on an item that
// stays where it was (every paste of one) writes nothing.
func (l *graphLink) saveObserved(key string, o observedLoop) (err error) {
	l.obsCacheMu.Lock()
	prev, cached := l.observed[key]
	l.observed[key] = o
	unchanged := cached && !l.obsUnsaved[key] && prev.equal(o)
	l.obsCacheMu.Unlock()
	if unchanged || l.observedDir == "" {
		return nil
	}
	defer func() {
		l.obsCacheMu.Lock()
		defer l.obsCacheMu.Unlock()
		if err != nil {
			if l.obsUnsaved == nil {
				l.obsUnsaved = map[string]bool{}
			}
			l.obsUnsaved[key] = true // the cache is ahead of the disk: write it next time
		} else {
			delete(l.obsUnsaved, key)
		}
	}()
	if err := os.MkdirAll(l.observedDir, 0o700); err != nil {
		return err
	}
	data, err := json.Marshal(o)
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(l.observedDir, "."+key+".tmp-*")
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(f.Name(), filepath.Join(l.observedDir, key+".json"))
	}
	if err != nil {
		os.Remove(f.Name())
	}
	return err
}

// assignmentNode is the node an assignment loopd rendered is for (the
// "you are now at node:" line of hooks.RenderAssignment).
func assignmentNode(text string) string {
	const at = "you are now at node: "
	i := strings.Index(text, at)
	if i < 0 {
		return ""
	}
	rest := text[i+len(at):]
	if j := strings.IndexAny(rest, " \n"); j >= 0 {
		rest = rest[:j]
	}
	return rest
}

// pasteAllowed recomputes the loop before a paste: an assignment is pasted
// only for the recomputed current node or one before it (a route back),
// never for a node the recompute has not reached. A refusal is logged.
func (l *graphLink) pasteAllowed(ctx context.Context, rt *graph.Runtime, item workitem.Ref, cwd, id, text string) bool {
	node := assignmentNode(text)
	rc, err := l.recompute(ctx, rt, id, cwd)
	if err != nil {
		l.record(EventClaimRefused, graph.LevelWarning, graph.Field{Key: "work_item", Value: item.String()}, graph.Field{Key: "what", Value: "paste"},
			graph.Field{Key: "asked_node", Value: node}, graph.Field{Key: "reason", Value: "loopd could not recompute the work item: " + err.Error()})
		return false
	}
	if node != "" && !rc.beyond(node) {
		return true
	}
	l.record(EventClaimRefused, graph.LevelWarning, append([]graph.Field{{Key: "work_item", Value: item.String()}, {Key: "what", Value: "paste"},
		{Key: "asked_node", Value: node}, {Key: "reason", Value: "the assignment is for a node loopd's recompute has not reached"}}, recomputeFields(rc)...)...)
	return false
}

// clipText bounds text for an event field, on a rune boundary.
func clipText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && (s[n]&0xC0) == 0x80 {
		n--
	}
	return s[:n] + "…"
}
