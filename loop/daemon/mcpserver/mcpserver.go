// Package mcpserver exposes theloop to agents and tools over the Model
// Context Protocol (github.com/modelcontextprotocol/go-sdk): streamable HTTP
// at /mcp on loopd's control plane, and stdio for harnesses that spawn
// servers (`loopctl mcp`).
//
// Tools: check, graph_show, graph_status, graph_complete, events, ask —
// each with JSON Schemas for its input and output, each calling the same
// code as the control-plane API (apiserver.Graphs) and the CLI. force and skip
// are deliberately not exposed: an agent never overrides the graph. On
// loopd's control plane only, the operator's tools (operator.go):
// list_sessions, session_transcript, list_attention, control_session.
package mcpserver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
	"github.com/theloop-dev/theloop/loop/daemon/apiserver"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Path is where the daemon mounts the streamable HTTP handler.
const Path = "/mcp"

// maxQuestion bounds an ask (GitHub refuses comments over 65,536
// characters; the marker needs room) — the same bound as `loopctl ask`.
const maxQuestion = 60000

// Config is what the tools reach.
type Config struct {
	// Graphs opens work items' runtimes (required for the graph tools).
	Graphs *apiserver.Graphs
	// EventLogPath is the event log the events tool reads ("" = none).
	EventLogPath string
	// FlushEventLog, when set, writes the event-log lines still queued;
	// the events tool calls it before it reads.
	FlushEventLog func()
	// Integrations posts ask's comment (nil: ask fails).
	Integrations graph.Integrations
	// Sink records session.awaiting_input (nil: none).
	Sink graph.Sink
	// Clock is the clock (required).
	Clock graph.Clock
	// Version is reported to clients.
	Version string
	// Operator, when set, adds the operator's tools (operator.go). Only
	// loopd's control plane sets it; an agent's `loopctl mcp` never does.
	Operator Operator
}

// Tools lists the tool names, in registration order.
var Tools = []string{"check", "graph_show", "graph_status", "graph_complete", "events", "ask"}

// New builds the MCP server with theloop's tools.
func New(cfg Config) (*mcp.Server, error) {
	if cfg.Clock == nil {
		return nil, errors.New("mcpserver: no clock (Config.Clock)")
	}
	if cfg.Version == "" {
		cfg.Version = "dev"
	}
	t := tools{cfg: cfg}
	s := mcp.NewServer(&mcp.Implementation{Name: "theloop", Title: "theloop — the-loop's process graph", Version: cfg.Version}, nil)
	ro := &mcp.ToolAnnotations{ReadOnlyHint: true}
	mcp.AddTool(s, &mcp.Tool{Name: "check", Annotations: ro, Description: "Every node's verdict for a work item (pass, skip, wait, block) and its current node. With recompute the stored pointer is not trusted. Pure: no network, no writes."}, t.check)
	mcp.AddTool(s, &mcp.Tool{Name: "graph_show", Annotations: ro, Description: "The process graph (nodes, edges, start); with a work item, each node marked current, passed or skipped."}, t.show)
	mcp.AddTool(s, &mcp.Tool{Name: "graph_status", Annotations: ro, Description: "Where a work item stands: the verdicts at its stored pointer."}, t.status)
	mcp.AddTool(s, &mcp.Tool{Name: "graph_complete", Description: "Claim that the current node's work is done. Runs the node's real exit chain: moves on when it passes, lists what is missing when not, answers wait at a human gate (only an authorized person's comment passes a gate)."}, t.complete)
	mcp.AddTool(s, &mcp.Tool{Name: "events", Annotations: ro, Description: "Query the event log: by work item, event name (prefix ending in . or *), since (90m, 2h, 3d, a date), limit."}, t.events)
	mcp.AddTool(s, &mcp.Tool{Name: "ask", Description: "Ask a human on the work item: posts the question as a marked comment. End your turn afterwards; the answer arrives later as an event."}, t.ask)
	if cfg.Operator != nil {
		addOperatorTools(s, cfg.Operator)
	}
	return s, nil
}

// Handler serves s over streamable HTTP. Requests arriving on a loopback
// TCP address must carry a loopback Host (DNS-rebinding protection); the
// unix socket is exempt, being reachable by its owner only.
func Handler(s *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return s }, &mcp.StreamableHTTPOptions{MaxRequestBodyBytes: 1 << 20})
}

type tools struct{ cfg Config }

func (t tools) graphs() (*apiserver.Graphs, error) {
	if t.cfg.Graphs == nil {
		return nil, errors.New("the graph runtime is not available here")
	}
	return t.cfg.Graphs, nil
}

// WorkItemInput names a work item in a repository.
type WorkItemInput struct {
	Repo     string `json:"repo" jsonschema:"the repository root, an absolute path"`
	WorkItem string `json:"workItem" jsonschema:"the work item id, e.g. issue-42"`
	PR       int    `json:"pr,omitempty" jsonschema:"address the pull request's inner loop"`
	PRRepo   string `json:"prRepo,omitempty" jsonschema:"the repository the pull request lives in, owner/repo"`
}

func (in WorkItemInput) request() api.GraphRequest {
	return api.GraphRequest{Repo: in.Repo, WorkItem: in.WorkItem, PR: in.PR, PRRepo: in.PRRepo}
}

// CheckInput is check's input.
type CheckInput struct {
	WorkItemInput
	Recompute bool `json:"recompute,omitempty" jsonschema:"derive the current node from the artifacts, ignoring the stored pointer"`
}

// Report is a work item's verdicts (graph.Report's JSON).
type Report struct {
	WorkItem     string             `json:"workItem"`
	CurrentNode  string             `json:"currentNode"`
	OK           bool               `json:"ok"`
	Parked       *graph.Parked      `json:"parked"`
	Nodes        []graph.NodeReport `json:"nodes"`
	Warnings     []string           `json:"warnings,omitempty"`
	RepoResolved *bool              `json:"repoResolved,omitempty"`
}

func report(rep *graph.Report) Report {
	if rep == nil {
		return Report{}
	}
	return Report{WorkItem: rep.WorkItem, CurrentNode: rep.CurrentNode, OK: rep.OK, Parked: rep.Parked, Nodes: rep.Nodes, Warnings: rep.Warnings}
}

func (t tools) check(ctx context.Context, _ *mcp.CallToolRequest, in CheckInput) (*mcp.CallToolResult, Report, error) {
	g, err := t.graphs()
	if err != nil {
		return nil, Report{}, err
	}
	rep, err := g.Check(ctx, api.CheckRequest{GraphRequest: in.request(), Recompute: in.Recompute})
	if err != nil {
		return nil, Report{}, err
	}
	out := report(rep.Report)
	out.RepoResolved = rep.RepoResolved
	return nil, out, nil
}

// ShowInput is graph_show's input: a shipped loop by name, or a work item's
// graph with its marks.
type ShowInput struct {
	Repo     string `json:"repo,omitempty" jsonschema:"the repository root (absolute) when a work item is named"`
	WorkItem string `json:"workItem,omitempty" jsonschema:"mark this work item's position"`
	Loop     string `json:"loop,omitempty" jsonschema:"a shipped loop (default pdlc-work-item-loop)"`
}

// GraphOutput is graph_show's output: the nodes and edges as the CLI's
// graph show --format json prints them.
type GraphOutput struct {
	Version int               `json:"version"`
	Name    string            `json:"name"`
	Start   string            `json:"start"`
	Nodes   []map[string]any  `json:"nodes"`
	Edges   []map[string]any  `json:"edges"`
	Marks   map[string]string `json:"marks,omitempty"`
}

// graphOutput renders the view through its JSON (the CLI's document).
func graphOutput(v *loop.GraphView) GraphOutput {
	out := GraphOutput{Version: v.Version, Name: v.Name, Start: v.Start, Marks: v.Marks}
	b, _ := json.Marshal(v)
	var doc struct {
		Nodes []map[string]any `json:"nodes"`
		Edges []map[string]any `json:"edges"`
	}
	_ = json.Unmarshal(b, &doc)
	out.Nodes, out.Edges = doc.Nodes, doc.Edges
	return out
}

func (t tools) show(ctx context.Context, _ *mcp.CallToolRequest, in ShowInput) (*mcp.CallToolResult, GraphOutput, error) {
	g, err := t.graphs()
	if err != nil {
		return nil, GraphOutput{}, err
	}
	v, err := g.Show(ctx, api.GraphRequest{Repo: in.Repo, WorkItem: in.WorkItem}, in.Loop)
	if err != nil {
		return nil, GraphOutput{}, err
	}
	return nil, graphOutput(v), nil
}

func (t tools) status(ctx context.Context, _ *mcp.CallToolRequest, in WorkItemInput) (*mcp.CallToolResult, Report, error) {
	g, err := t.graphs()
	if err != nil {
		return nil, Report{}, err
	}
	rep, err := g.Status(ctx, in.request())
	if err != nil {
		return nil, Report{}, err
	}
	return nil, report(rep), nil
}

// CompleteInput is graph_complete's input.
type CompleteInput struct {
	WorkItemInput
	Node string `json:"node,omitempty" jsonschema:"the node claimed (default the current one); a claim on another node is refused"`
}

// complete answers graph.Claim: {node, status, outcome, moved,
// currentNode, messages, reason}.
func (t tools) complete(ctx context.Context, _ *mcp.CallToolRequest, in CompleteInput) (*mcp.CallToolResult, graph.Claim, error) {
	g, err := t.graphs()
	if err != nil {
		return nil, graph.Claim{}, err
	}
	c, err := g.Complete(ctx, api.CompleteRequest{GraphRequest: in.request(), Node: in.Node, Actor: "mcp"})
	if err != nil {
		return nil, graph.Claim{}, err
	}
	return nil, *c, nil
}

// EventsInput is events' input.
type EventsInput struct {
	WorkItem string `json:"workItem,omitempty" jsonschema:"a ref (github:o/r#42) or id (issue-42)"`
	Event    string `json:"event,omitempty" jsonschema:"an event name, or a prefix ending in . or *"`
	Since    string `json:"since,omitempty" jsonschema:"a duration ago (90m, 2h, 3d) or a date"`
	Limit    int    `json:"limit,omitempty" jsonschema:"only the last N matching events (default 50)"`
}

// EventsOutput is events' output: event-log records.
type EventsOutput struct {
	Events []map[string]any `json:"events"`
}

func (t tools) events(_ context.Context, _ *mcp.CallToolRequest, in EventsInput) (*mcp.CallToolResult, EventsOutput, error) {
	if t.cfg.EventLogPath == "" {
		return nil, EventsOutput{}, errors.New("the event log is not configured (eventLog.enabled)")
	}
	q := loop.EventQuery{WorkItem: in.WorkItem, Event: in.Event, Limit: in.Limit}
	if q.Limit <= 0 {
		q.Limit = 50
	}
	if in.Since != "" {
		since, err := loop.ParseSince(in.Since, t.cfg.Clock.Now())
		if err != nil {
			return nil, EventsOutput{}, err
		}
		q.Since = since
	}
	if t.cfg.FlushEventLog != nil {
		t.cfg.FlushEventLog()
	}
	recs, err := loop.ReadEvents(t.cfg.EventLogPath, q)
	if err != nil {
		return nil, EventsOutput{}, err
	}
	out := EventsOutput{Events: make([]map[string]any, 0, len(recs))}
	for _, r := range recs {
		out.Events = append(out.Events, r.JSON())
	}
	return nil, out, nil
}

// AskInput is ask's input.
type AskInput struct {
	WorkItem string `json:"workItem" jsonschema:"the work item's ref, github:[host/]owner/repo#N"`
	Question string `json:"question" jsonschema:"the question for a human (plain text or Markdown)"`
}

// AskOutput is ask's output.
type AskOutput struct {
	Posted bool   `json:"posted"`
	URL    string `json:"url,omitempty"`
	Next   string `json:"next"`
}

// ask is `loopctl ask` (docs/daemon.md §10): the question goes to the work
// item as a marked comment and session.awaiting_input is recorded.
func (t tools) ask(ctx context.Context, _ *mcp.CallToolRequest, in AskInput) (*mcp.CallToolResult, AskOutput, error) {
	ref, err := workitem.Parse(strings.TrimSpace(in.WorkItem))
	if err != nil || ref.Provider != "github" {
		return nil, AskOutput{}, fmt.Errorf("workItem %q: want a GitHub work item ref, github:[host/]owner/repo#N", in.WorkItem)
	}
	q := strings.TrimSpace(in.Question)
	switch {
	case q == "":
		return nil, AskOutput{}, errors.New("the question is empty")
	case len(q) > maxQuestion:
		return nil, AskOutput{}, fmt.Errorf("the question is over %d bytes; shorten it", maxQuestion)
	case !utf8.ValidString(q):
		return nil, AskOutput{}, errors.New("the question is not valid UTF-8")
	}
	if t.cfg.Integrations == nil {
		return nil, AskOutput{}, errors.New("no GitHub integration is available to post the question")
	}
	res, postErr := t.cfg.Integrations.Call(ctx, ops.GitHubAddComment, map[string]any{"ref": ref.String(), "body": hooks.Mark(q)})
	url, _ := res["url"].(string)
	if t.cfg.Sink != nil {
		level := graph.LevelInfo
		if postErr != nil {
			level = graph.LevelWarning
		}
		t.cfg.Sink.Emit(graph.LogEvent{Time: t.cfg.Clock.Now(), Name: "session.awaiting_input", Level: level, Fields: []graph.Field{
			{Key: "work_item", Value: ref.String()}, {Key: "question", Value: q}, {Key: "actor", Value: "mcp"},
			{Key: "comment_url", Value: url}, {Key: "comment_posted", Value: postErr == nil},
		}})
	}
	if postErr != nil {
		return nil, AskOutput{}, fmt.Errorf("the question was not posted on %s: %w", ref, postErr)
	}
	return nil, AskOutput{Posted: true, URL: url, Next: "end your turn; the answer arrives as an event"}, nil
}
