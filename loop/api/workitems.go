package api

import (
	"context"
	"net/url"
	"time"
)

// Paths of the work-item, event-type and repository reads
// (docs/daemon.md §13). Refs and repositories travel in the query, never
// in the path.
const (
	// WorkItemsPath is GET /work-items: every work item loopd knows
	// ([]WorkItem), as the dashboard's board shows them.
	WorkItemsPath = "/work-items"
	// WorkItemPath is GET /work-items/one?ref=REF: one of them.
	WorkItemPath = "/work-items/one"
	// EventTypesPath is GET /events/types: the event names the event log
	// holds, with their counts ([]EventType, by name).
	EventTypesPath = "/events/types"
	// RepoScenariosPath is GET /repo/scenarios?repo=DIR (loop.ScenarioScan).
	RepoScenariosPath = "/repo/scenarios"
	// RepoInstructionsPath is GET /repo/instructions?repo=DIR
	// (loop.Instructions).
	RepoInstructionsPath = "/repo/instructions"
	// RepoCriticsPath is GET /repo/critics?repo=DIR (RepoCritics).
	RepoCriticsPath = "/repo/critics"
	// RepoCriticsRunPath is POST /repo/critics/run (CriticRunRequest →
	// CriticRun).
	RepoCriticsRunPath = "/repo/critics/run"
)

// WorkItem is one work item as loopd sees it: its session, the node it
// stands at and why it waits, the same row the dashboard's board draws.
type WorkItem struct {
	Ref   string `json:"ref"`
	Repo  string `json:"repo"`
	URL   string `json:"url,omitempty"`
	Title string `json:"title,omitempty"`
	Loop  string `json:"loop,omitempty"`
	Node  string `json:"node,omitempty"`
	Phase string `json:"phase,omitempty"`
	// Human is set when the current node is a human gate.
	Human bool `json:"human"`
	// State is pending, working, blocked, waiting, parked or done.
	State string `json:"state"`
	// Finding says why the item is blocked or parked.
	Finding string    `json:"finding,omitempty"`
	Since   time.Time `json:"since,omitzero"`
	// SessionLive reports a live agent session.
	SessionLive bool      `json:"sessionLive"`
	LastEvent   string    `json:"lastEvent,omitempty"`
	LastEventAt time.Time `json:"lastEventAt,omitzero"`
	// PendingTicketEffects counts the outbox's effects not made yet.
	PendingTicketEffects int `json:"pendingTicketEffects"`
	// PullRequests are the pull requests loopd follows for it (their URL,
	// or #n).
	PullRequests []string `json:"pullRequests"`
}

// EventType is one event name of the event log.
type EventType struct {
	Name  string    `json:"name"`
	Count int       `json:"count"`
	Last  time.Time `json:"last"`
}

// RepoCritic is one critic a repository configures (reviews.critics).
type RepoCritic struct {
	Name           string `json:"name"`
	Harness        string `json:"harness"`
	Model          string `json:"model,omitempty"`
	TimeoutSeconds int    `json:"timeoutSeconds"`
}

// RepoCritics is GET /repo/critics' answer.
type RepoCritics struct {
	Critics  []RepoCritic `json:"critics"`
	Warnings []string     `json:"warnings,omitempty"`
}

// CriticRunRequest asks for a critic's run on a work item. loopd never
// runs a critic itself (a harness over a checkout the agent writes is the
// agent's program): DryRun must be true, and the answer is the plan and
// the prompt `loopctl critic run` uses, in the agent's world.
type CriticRunRequest struct {
	Repo     string `json:"repo"`
	WorkItem string `json:"workItem"`
	Critic   string `json:"critic"`
	Node     string `json:"node,omitempty"`
	Prompt   string `json:"prompt,omitempty"`
	DryRun   bool   `json:"dryRun"`
}

// CriticRun is a critic run as planned: the critic and its harness, where
// its review goes, the prompt, and the command that runs it.
type CriticRun struct {
	Critic  string `json:"critic"`
	Harness string `json:"harness"`
	Model   string `json:"model,omitempty"`
	Node    string `json:"node"`
	Section string `json:"section"`
	Prompt  string `json:"prompt"`
	// RunWith is the loopctl command that runs it where it may run.
	RunWith string `json:"runWith"`
}

// WorkItems lists the work items loopd knows.
func (c *Client) WorkItems(ctx context.Context) ([]WorkItem, error) {
	var out []WorkItem
	err := c.Do(ctx, "GET", WorkItemsPath, nil, nil, &out)
	return out, err
}

// WorkItem reads one work item.
func (c *Client) WorkItem(ctx context.Context, ref string) (WorkItem, error) {
	var out WorkItem
	err := c.Do(ctx, "GET", WorkItemPath, url.Values{"ref": {ref}}, nil, &out)
	return out, err
}

// EventTypes lists the event names the event log holds.
func (c *Client) EventTypes(ctx context.Context) ([]EventType, error) {
	var out []EventType
	err := c.Do(ctx, "GET", EventTypesPath, nil, nil, &out)
	return out, err
}
