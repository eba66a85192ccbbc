package daemon

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
	"github.com/theloop-dev/theloop/loop/daemon/dispatch"
	"github.com/theloop-dev/theloop/loop/daemon/queue"
	"github.com/theloop-dev/theloop/sessions"
	"github.com/theloop-dev/theloop/workitem"
)

// ClusterConfig lets several loopd share the work items of one NATS
// cluster (docs/decisions.md §15; examples/cluster). With Node empty
// the daemon dispatches the whole queue alone (a second loopd on the same
// queue waits as a standby).
type ClusterConfig struct {
	// Node names this loopd among those sharing queue.url (service.node;
	// unique per node, stable across restarts: a node restarted within
	// LeaseTTL takes its own items back at once).
	Node string
	// MaxSessions is this node's capacity (service.maxSessions): the work
	// items — each with its agent session — it owns at once. A full node
	// declines new items; a node with room takes them. 0: no cap.
	MaxSessions int
	// LeaseTTL is how long a dead node's items stay with it before
	// another node takes them over (service.leaseTTLSeconds, default 15 s).
	LeaseTTL time.Duration
	// QueueReplicas is the replication of the streams and buckets
	// (queue.replicas; 3 on a 3-server cluster).
	QueueReplicas int
}

// dispatchRunner is the single-node Dispatcher or the cluster's Shared.
type dispatchRunner interface {
	Run(ctx context.Context) error
}

// cluster is this node's part of a cluster (service.node): it builds the
// dispatcher, and answers the shared dispatcher's questions about the items
// this node holds (their sessions, takeover, a lost lease).
type cluster struct {
	cfg            ClusterConfig
	queueURL       string
	defaultHarness string
	reg            *sessions.Registry
	mgr            *sessions.Manager
	intake         *intake
	now            func() time.Time
	emit           func(name string, level graph.Level, fields ...graph.Field)
	logf           func(format string, args ...any)
	// ownership sees the ownership log (Deps.Ownership; nil: none).
	ownership func(dispatch.Ownership)

	mu     sync.Mutex
	shared *dispatch.Shared
}

// dispatcher builds the dispatcher of h: the single-node one unless
// service.node is set.
func (c *cluster) dispatcher(ctx context.Context, q *queue.Queue, h dispatch.Handler, base dispatch.Config) (dispatchRunner, error) {
	if c.cfg.Node == "" {
		if c.queueURL != "" {
			owners, err := q.SharedOwners(ctx)
			if err != nil {
				return nil, err
			}
			if len(owners) > 0 {
				return nil, fmt.Errorf("daemon: loopd nodes %v share the work of queue.url %s; set service.node (a unique name) here too, or use another queue", owners, c.queueURL)
			}
		}
		return dispatch.New(q, h, base)
	}
	sh, err := dispatch.NewShared(ctx, q, h, dispatch.SharedConfig{
		Config: base, Node: c.cfg.Node, MaxItems: c.cfg.MaxSessions, LeaseTTL: c.cfg.LeaseTTL,
		Holds:     c.holdsItem,
		SessionOf: c.sessionOf,
		Takeover:  c.takeover,
		Lost:      c.lostItem,
		Own:       c.onOwnership,
		Declines:  c.onDecline,
		Now:       c.now,
	})
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	c.shared = sh
	c.mu.Unlock()
	c.dropMovedItems(ctx, sh)
	return sh, nil
}

// dropMovedItems stops the sessions this node still runs for items another
// node took over while it was away (stopped longer than the lease TTL):
// their owner is that node now.
func (c *cluster) dropMovedItems(ctx context.Context, sh *dispatch.Shared) {
	recs, _ := c.reg.List()
	for _, r := range recs {
		if !r.Status.Live() {
			continue
		}
		owner, err := sh.Leases().Owner(ctx, queue.SlotOf(r.Item.String()))
		if err == nil && owner != "" && owner != c.cfg.Node {
			c.logf("%s moved to node %s while this node was away; stopping its session here", r.Item, owner)
			c.lostItem(r.Item.String())
		}
	}
}

// sharedDispatcher is the cluster dispatcher (nil on a single node, and
// on a nil cluster: before the pipeline is built).
func (c *cluster) sharedDispatcher() *dispatch.Shared {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.shared
}

func (c *cluster) record(ref string) (workitem.Ref, sessions.Record, bool) {
	item, err := workitem.Parse(ref)
	if err != nil {
		return item, sessions.Record{}, false
	}
	rec, live := c.intake.live(item)
	return item, rec, live
}

// ownsItem: on a single node every item is this node's; in a cluster the
// item's lease says (an unreadable lease is not ours: never act on it).
func (c *cluster) ownsItem(ctx context.Context, item workitem.Ref) bool {
	sh := c.sharedDispatcher()
	if sh == nil {
		return true
	}
	owner, err := sh.Leases().Owner(ctx, queue.SlotOf(item.String()))
	return err == nil && owner == c.cfg.Node
}

// holdsItem: an item with a live session here stays owned by this node.
func (c *cluster) holdsItem(ref string) bool {
	_, _, live := c.record(ref)
	return live
}

func (c *cluster) sessionOf(ref string) string {
	_, rec, live := c.record(ref)
	if !live {
		return ""
	}
	return rec.SessionID
}

// takeoverPrompt is pasted into the session a node starts for an item it
// took over. Fixed text: nothing from the registry (another node's words)
// reaches the agent.
const takeoverPrompt = "The loopd node that ran this work item stopped; this machine has taken the work item over. Continue where the work stands: read the artifacts named above and the work item's latest comments."

// takeover starts the item's session on this node after its owner died:
// a new worktree, then the respawn path — the previous conversation is
// resumed when this machine can reach it, otherwise a fresh one starts
// seeded with the item's artifacts (recorded as a fallback). Recorded as
// session.takeover.
func (c *cluster) takeover(ctx context.Context, t dispatch.Takeover) error {
	item, err := workitem.Parse(t.Item)
	if err != nil {
		return fmt.Errorf("takeover of %q: %w", t.Item, err)
	}
	fields := []graph.Field{{Key: "work_item", Value: item.String()}, {Key: "from_node", Value: t.From}, {Key: "node", Value: c.cfg.Node},
		{Key: "previous_session_id", Value: t.Session}, {Key: "owned_since", Value: t.Since.UTC().Format(time.RFC3339)}}
	if _, _, live := c.record(t.Item); !live {
		ev := &ingress.Event{Event: "takeover", DeliveryID: "takeover:" + t.Slot, Repo: item.Owner + "/" + item.Repo}
		cwd, err := c.intake.workspace(ctx, item, ev)
		if err != nil {
			c.emit("session.takeover_failed", graph.LevelError, append(fields, graph.Field{Key: "error", Value: err.Error()})...)
			return err
		}
		sid := t.Session
		if !sessions.ValidSessionID(sid) {
			sid = ""
		}
		if err := c.reg.Put(ctx, sessions.Record{Item: item, Harness: c.defaultHarness, SessionID: sid, TmuxName: sessions.TmuxName(item),
			Cwd: cwd, Status: sessions.StatusActive, Created: c.now().UTC()}); err != nil {
			return err
		}
	}
	res, err := c.mgr.Respawn(ctx, item, takeoverPrompt)
	if err != nil {
		c.emit("session.takeover_failed", graph.LevelError, append(fields, graph.Field{Key: "error", Value: err.Error()})...)
		return err
	}
	fields = append(fields, graph.Field{Key: "resumed", Value: res.Resumed}, graph.Field{Key: "session_id", Value: res.Record.SessionID})
	if res.Fallback != nil {
		fields = append(fields, graph.Field{Key: "fallback_reason", Value: res.Fallback.Reason}, graph.Field{Key: "artifacts", Value: res.Fallback.Artifacts})
	}
	c.emit("session.takeover", graph.LevelInfo, fields...)
	return nil
}

// lostItem stops the item's session here: its lease lapsed and another
// node owns it now.
func (c *cluster) lostItem(ref string) {
	item, _, live := c.record(ref)
	if !live {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err := c.mgr.Close(ctx, item, false)
	fields := []graph.Field{{Key: "work_item", Value: ref}, {Key: "node", Value: c.cfg.Node}}
	if err != nil {
		fields = append(fields, graph.Field{Key: "error", Value: err.Error()})
	}
	c.emit("session.lease_lost", graph.LevelWarning, fields...)
}

// onOwnership writes the ownership log to the event log.
func (c *cluster) onOwnership(o dispatch.Ownership) {
	name := "lease.released"
	switch {
	case o.Acquired:
		name = "lease.acquired"
	case o.Lost:
		name = "lease.lost"
	}
	fields := []graph.Field{{Key: "node", Value: o.Node}, {Key: "slot", Value: o.Slot}, {Key: "work_item", Value: o.Item}, {Key: "revision", Value: o.Revision}}
	if o.Acquired {
		if o.From != "" {
			fields = append(fields, graph.Field{Key: "from_node", Value: o.From})
		}
	}
	c.emit(name, graph.LevelInfo, fields...)
	if c.ownership != nil {
		c.ownership(o)
	}
}

// onDecline records in the event log that this node started or stopped
// declining an item for capacity (the "needs you" list reads the live set
// from the dispatcher, capacityWaits).
func (c *cluster) onDecline(dc dispatch.Declined, open bool) {
	name, level := "dispatch.capacity_declined", graph.LevelWarning
	if !open {
		name, level = "dispatch.capacity_cleared", graph.LevelInfo
	}
	c.emit(name, level, graph.Field{Key: "work_item", Value: dc.Item}, graph.Field{Key: "slot", Value: dc.Slot},
		graph.Field{Key: "node", Value: dc.Node}, graph.Field{Key: "max_sessions", Value: dc.MaxItems},
		graph.Field{Key: "since", Value: dc.Since.UTC().Format(time.RFC3339)})
}

// Capacity implements dashboard.CapacitySource: the items this node
// declines for capacity now (none on a single node).
func (s *dashSource) Capacity(context.Context) ([]dashboard.Capacity, error) {
	sh := s.d.cluster.sharedDispatcher()
	if sh == nil {
		return nil, nil
	}
	var out []dashboard.Capacity
	for _, dc := range sh.Declined() {
		if dc.Item == "" {
			continue // an event that names no work item: nothing to show a person
		}
		out = append(out, dashboard.Capacity{Ref: dc.Item, Node: dc.Node, MaxSessions: dc.MaxItems, Since: dc.Since})
	}
	return out, nil
}

var _ dashboard.CapacitySource = (*dashSource)(nil)
