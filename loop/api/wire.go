package api

import (
	"path/filepath"
	"time"

	"github.com/theloop-dev/theloop/graph"
)

// SocketName is the control socket's file name under the state root.
const SocketName = "loopd.sock"

// DefaultTokenEnv is service.tokenEnv's default: the variable holding the
// bearer token a TCP listener requires.
const DefaultTokenEnv = "THE_LOOP_SERVICE_TOKEN"

// SocketPath is <stateRoot>/loopd.sock.
func SocketPath(stateRoot string) string { return filepath.Join(stateRoot, SocketName) }

// Prefix is the API's path prefix.
const Prefix = "/api/v1"

// LinkPRRequest is POST /sessions/link-pr's body.
type LinkPRRequest struct {
	Ref         string `json:"ref"`
	PullRequest string `json:"pullRequest"`
}

// LinkPRResult answers POST /sessions/link-pr.
type LinkPRResult struct {
	Ref         string `json:"ref"`
	PullRequest string `json:"pullRequest"`
	// Linked is false when the link already existed.
	Linked bool `json:"linked"`
}

// ControlResult answers a session control verb.
type ControlResult struct {
	Ref    string `json:"ref"`
	Verb   string `json:"verb"`
	Effect string `json:"effect"`
	// Queued is the delivery id of the command handed to the queue (start
	// and cleanup go through the queue like the ticket's keywords).
	Queued string `json:"queued,omitempty"`
	// Announced is the marked comment's URL ("" when none was posted);
	// AnnounceError says why it was not.
	Announced     string `json:"announced,omitempty"`
	AnnounceError string `json:"announceError,omitempty"`
}

// Health is the daemon's one health answer: GET /health on the control
// socket, the webhook port's /healthz, theloop_healthy on /metrics and
// `loopctl daemon status` all report this value.
type Health struct {
	// OK is false when loopd cannot keep what it is sent.
	OK bool `json:"ok"`
	// State is "ok" or "unavailable".
	State string `json:"state"`
	// Reason names why not ok: one of the Health* reasons.
	Reason string `json:"reason,omitempty"`
	// Detail is the error behind Reason (control socket only).
	Detail string `json:"detail,omitempty"`
}

// Health states and reasons.
const (
	HealthOK          = "ok"
	HealthUnavailable = "unavailable"

	HealthNotRunning       = "not-running"
	HealthDiskFull         = "disk-full"
	HealthCannotPersist    = "cannot-persist"
	HealthQueueUnavailable = "queue-unavailable"
)

// Status describes the running daemon (GET /status).
type Status struct {
	// Health is the daemon's health, as GET /health answers it.
	Health    *Health    `json:"health,omitempty"`
	Version   string     `json:"version"`
	PID       int        `json:"pid"`
	StateRoot string     `json:"stateRoot"`
	Webhook   string     `json:"webhook"`
	StartedAt time.Time  `json:"startedAt"`
	Uptime    float64    `json:"uptimeSeconds"`
	Queue     *QueueView `json:"queue,omitempty"`
	// LiveSessions counts active and paused sessions.
	LiveSessions int `json:"liveSessions"`
	// Warnings are problems the daemon runs with (a part unavailable).
	Warnings []string `json:"warnings,omitempty"`
	// Cluster is set when this loopd shares the work with others
	// (service.node).
	Cluster *ClusterView `json:"cluster,omitempty"`
	// Harnesses are the agent CLIs loopd can host, with the version each
	// reported at its first status (routing.defaultHarness is Default).
	Harnesses []HarnessView `json:"harnesses,omitempty"`
	// PluginUpgrade is what upgrading theloop's plugin changed before this
	// loopd started (a restart with upgrade); PluginUpgradeError why it
	// failed. Both empty on an ordinary start.
	PluginUpgrade      []string `json:"pluginUpgrade,omitempty"`
	PluginUpgradeError string   `json:"pluginUpgradeError,omitempty"`
}

// HarnessView is one agent CLI as loopd found it.
type HarnessView struct {
	Name    string `json:"name"`
	Binary  string `json:"binary"`
	Path    string `json:"path,omitempty"`
	Version string `json:"version"`
	Default bool   `json:"default,omitempty"`
}

// ClusterView is this node's share of a cluster's work items.
type ClusterView struct {
	Node string `json:"node"`
	// MaxSessions is the node's capacity (0: none).
	MaxSessions int `json:"maxSessions"`
	// Owned are the work-item slots this node holds the lease of.
	Owned []string `json:"owned"`
}

// ControlRequest is POST /sessions/control's body.
type ControlRequest struct {
	Ref  string `json:"ref"`
	Verb string `json:"verb"`
	// Actor, when set, must be the caller's authenticated identity (403
	// otherwise): the actor recorded is always who the transport proved
	// the caller to be.
	Actor string `json:"actor,omitempty"`
	// NoComment skips the marked comment announcing the command on the
	// work item (docs/daemon.md §5.4: posted unless --no-comment).
	NoComment bool `json:"noComment,omitempty"`
}

// ControlVerbs are the session verbs the API applies.
var ControlVerbs = []string{"stop", "pause", "resume"}

// QueueView is GET /queue's answer.
type QueueView struct {
	Depth uint64 `json:"depth"`
	// Oldest is when the oldest unacknowledged event was kept (absent when
	// the queue is empty); OldestAge is its age in seconds.
	Oldest      *time.Time `json:"oldest,omitempty"`
	OldestAge   float64    `json:"oldestAgeSeconds"`
	DeadLetters uint64     `json:"deadLetters"`
}

// DeadLetterView is one dead letter as the API shows it: the event's
// routing facts, never its payload or comment bodies.
type DeadLetterView struct {
	Seq         uint64    `json:"seq"`
	DeliveryID  string    `json:"deliveryId"`
	OriginalSeq uint64    `json:"originalSeq"`
	Attempts    int       `json:"attempts"`
	Reason      string    `json:"reason"`
	At          time.Time `json:"at"`
	Event       string    `json:"event,omitempty"`
	Action      string    `json:"action,omitempty"`
	Repo        string    `json:"repo,omitempty"`
	WorkItems   []string  `json:"workItems,omitempty"`
}

// ReplayRequest is POST /queue/dead/replay's body.
type ReplayRequest struct {
	Seq uint64 `json:"seq"`
}

// GraphRequest names a work item in a repository: the fields every graph
// verb shares (the CLI's --repo, --graph, --pr, --pr-repo and argument).
type GraphRequest struct {
	// Repo is the repository root, an absolute path.
	Repo string `json:"repo"`
	// WorkItem is the work item id (issue-42).
	WorkItem string `json:"workItem"`
	// Graph is a graph file to load instead of the shipped loop.
	Graph  string `json:"graph,omitempty"`
	PR     int    `json:"pr,omitempty"`
	PRRepo string `json:"prRepo,omitempty"`
}

// CheckRequest is POST /check's body.
type CheckRequest struct {
	GraphRequest
	Recompute bool `json:"recompute,omitempty"`
}

// CheckReport is graph.Report plus repoResolved, false when the repository
// does not exist (loopctl check prints the same).
type CheckReport struct {
	*graph.Report
	RepoResolved *bool `json:"repoResolved,omitempty"`
}

// CompleteRequest is POST /graph/complete's body.
type CompleteRequest struct {
	GraphRequest
	Node  string `json:"node,omitempty"`
	Actor string `json:"actor,omitempty"`
}

// ForceRequest is POST /graph/force's body.
type ForceRequest struct {
	GraphRequest
	To     string `json:"toNode"`
	Reason string `json:"reason"`
	// Actor is who forces. Over the API it is the caller's authenticated
	// identity; a different value is refused (403).
	Actor string `json:"actor,omitempty"`
}

// SkipRequest is POST /graph/skip's body: nodes and skip-set names.
type SkipRequest struct {
	GraphRequest
	Nodes  []string `json:"nodes"`
	Reason string   `json:"reason"`
	// Actor is who declares. Over the API it is the caller's
	// authenticated identity; a different value is refused (403).
	Actor string `json:"actor,omitempty"`
}

// RestartPath is POST /restart: loopd stops gracefully (the webhook
// listener first, then the dispatcher drains) and starts again in the same
// process from its executable on disk, so a newly installed binary takes
// over. With WithUpgrade, the new process first upgrades theloop's plugin
// for every harness it is installed for (as `loopctl install` would), before
// it serves or spawns anything.
const RestartPath = "/restart"

// RestartRequest is POST /restart's optional body.
type RestartRequest struct {
	WithUpgrade bool `json:"withUpgrade,omitempty"`
	// Actor, when set, must be the caller's authenticated identity.
	Actor string `json:"actor,omitempty"`
}

// RestartResult answers POST /restart, before the restart begins.
type RestartResult struct {
	Restarting  bool   `json:"restarting"`
	WithUpgrade bool   `json:"withUpgrade"`
	Actor       string `json:"actor"`
	PID         int    `json:"pid"`
	// StartedAt is when the loopd being restarted started: the restarted
	// one answers GET /status with a later one.
	StartedAt time.Time `json:"startedAt"`
}
