package apiserver

import (
	"github.com/theloop-dev/theloop/loop/api"

	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/graph/graphfile"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/run"
)

// Graphs opens work items' runtimes the way loopctl does: check, show and
// status through loop.Open (pure: no integrations, no event log, no
// subprocess); complete, advance, force and skip through loop.OpenRepo →
// Repo.Runtime with the daemon's integrations, event sink and policy.
type Graphs struct {
	// SpecDir is routing.graph.specDir ("" = the repository decides).
	SpecDir         string
	AuthorizedUsers []string
	ExecuteKeyword  string
	SessionPerPr    string
	// Integrations performs the live verbs' side effects (nil: none).
	Integrations graph.Integrations
	// Sink records the live verbs' events (nil: none).
	Sink graph.Sink
	// Runner runs the commands hooks such as verify-tests need (nil: run.Exec).
	Runner run.Runner
	Clock  graph.Clock
	// HookObserver is told each hook's wall time (metrics; nil: none).
	HookObserver func(graph.HookTiming)
	// Scrub cleans what the live verbs write from a person's text — a
	// forced move's or a skip's reason into graph-state.json,
	// execution-log.md and the ticket (loopd's scrubber; nil: nothing).
	Scrub func(any) any

	mu sync.RWMutex // guards the policy fields against SetPolicy
}

// SetPolicy replaces the soft policy (a daemon's SIGHUP reload) while
// requests run.
func (g *Graphs) SetPolicy(authorizedUsers []string, executeKeyword, sessionPerPr string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.AuthorizedUsers, g.ExecuteKeyword, g.SessionPerPr = authorizedUsers, executeKeyword, sessionPerPr
}

func validate(req api.GraphRequest, needItem bool) error {
	if req.Repo == "" || !filepath.IsAbs(req.Repo) {
		return badRequest("repo must be the repository root as an absolute path (got %q)", req.Repo)
	}
	if needItem && req.WorkItem == "" {
		return badRequest("workItem is required (e.g. issue-42)")
	}
	if req.PR < 0 {
		return badRequest("pr %d: a pull request number", req.PR)
	}
	return nil
}

func loadGraph(req api.GraphRequest) (*graph.Graph, error) {
	if req.Graph == "" {
		return nil, nil
	}
	src, err := os.ReadFile(req.Graph)
	if err != nil {
		return nil, badRequest("graph: %v", err)
	}
	return graphfile.Load(req.Graph, src, loop.ShippedHooks())
}

func (g *Graphs) clock() graph.Clock {
	if g.Clock == nil {
		return graph.SystemClock{}
	}
	return g.Clock
}

// openCheck is loopctl's openCheck.
func (g *Graphs) openCheck(req api.GraphRequest) (*graph.Runtime, error) {
	gr, err := loadGraph(req)
	if err != nil {
		return nil, err
	}
	return loop.Open(req.Repo, loop.Options{Graph: gr, WorkItem: req.WorkItem, PR: req.PR, PRRepo: req.PRRepo, Clock: g.clock(), HookObserver: g.HookObserver})
}

// openLive is the daemon's counterpart of loop.OpenLive: the daemon's
// settings, integrations and sink instead of the CLI config's.
func (g *Graphs) openLive(req api.GraphRequest) (*graph.Runtime, error) {
	repo, err := loop.OpenRepo(req.Repo, g.SpecDir)
	if err != nil {
		return nil, err
	}
	gr, err := loadGraph(req)
	if err != nil {
		return nil, err
	}
	runner := g.Runner
	if runner == nil {
		runner = run.Exec{}
	}
	g.mu.RLock()
	authorized, keyword, perPr := g.AuthorizedUsers, g.ExecuteKeyword, g.SessionPerPr
	g.mu.RUnlock()
	return repo.Runtime(loop.Options{
		Graph: gr, WorkItem: req.WorkItem, PR: req.PR, PRRepo: req.PRRepo,
		AuthorizedUsers: authorized, ExecuteKeyword: keyword, SessionPerPr: perPr,
		// No RepoCommands: loopd never runs a watched repository's code
		// (verify-tests reads the recorded run instead).
		Integrations: g.Integrations, Commands: loop.Commands{Runner: runner, Root: repo.Root},
		Sink: g.Sink, Clock: g.clock(), HookObserver: g.HookObserver, Scrub: g.Scrub,
	})
}

func (s *Server) graphs() (*Graphs, error) {
	if s.b.Graphs == nil {
		return nil, unavailable("the graph runtime")
	}
	return s.b.Graphs, nil
}

func (s *Server) check(_ http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.graphs()
	if err != nil {
		return nil, err
	}
	var req api.CheckRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	return g.Check(r.Context(), req)
}

// Check is `loopctl check ID [--recompute]`.
func (g *Graphs) Check(ctx context.Context, req api.CheckRequest) (*api.CheckReport, error) {
	if err := validate(req.GraphRequest, true); err != nil {
		return nil, err
	}
	if st, err := os.Stat(req.Repo); err != nil || !st.IsDir() {
		no := false
		return &api.CheckReport{Report: &graph.Report{WorkItem: req.WorkItem, Nodes: []graph.NodeReport{}}, RepoResolved: &no}, nil
	}
	rt, err := g.openCheck(req.GraphRequest)
	if err != nil {
		return nil, err
	}
	rep, err := rt.Status(ctx, req.WorkItem, req.Recompute)
	if err != nil {
		return nil, err
	}
	return &api.CheckReport{Report: rep}, nil
}

// graphVerb serves a POST verb of Graphs: the JSON body decoded into the
// verb's request, the verb's result as the answer.
func graphVerb[Req, Resp any](s *Server, verb func(*Graphs, context.Context, Req) (Resp, error)) apiHandler {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		g, err := s.graphs()
		if err != nil {
			return nil, err
		}
		var req Req
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		return verb(g, r.Context(), req)
	}
}

// operatorGraphVerb is graphVerb for a verb that acts for an operator
// (force, skip): the actor it records is the authenticated caller's
// identity; a body actor naming anyone else is refused (actorOf).
func operatorGraphVerb[Req, Resp any](s *Server, verb func(*Graphs, context.Context, Req) (Resp, error), actor func(*Req) *string) apiHandler {
	return func(_ http.ResponseWriter, r *http.Request) (any, error) {
		g, err := s.graphs()
		if err != nil {
			return nil, err
		}
		var req Req
		if err := decode(r, &req); err != nil {
			return nil, err
		}
		a := actor(&req)
		if *a, err = actorOf(r, *a); err != nil {
			return nil, err
		}
		return verb(g, r.Context(), req)
	}
}

func (s *Server) graphShow(_ http.ResponseWriter, r *http.Request) (any, error) {
	g, err := s.graphs()
	if err != nil {
		return nil, err
	}
	q := r.URL.Query()
	req := api.GraphRequest{Repo: q.Get("repo"), WorkItem: q.Get("workItem"), Graph: q.Get("graph"), PRRepo: q.Get("prRepo")}
	if v := q.Get("pr"); v != "" {
		if req.PR, err = strconv.Atoi(v); err != nil {
			return nil, badRequest("pr %q: a pull request number", v)
		}
	}
	return g.Show(r.Context(), req, q.Get("loop"))
}

// Show is `loopctl graph show --format json`: a shipped loop when no work
// item, graph file or pull request is named, else the work item's graph
// with its marks.
func (g *Graphs) Show(ctx context.Context, req api.GraphRequest, loopName string) (*loop.GraphView, error) {
	if req.WorkItem == "" && req.Graph == "" && req.PR == 0 {
		if loopName == "" {
			loopName = loop.WorkItemLoop
		}
		gr, err := loop.ShippedGraph(loopName)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrBadRequest, err)
		}
		v := loop.NewGraphView(gr, nil)
		return &v, nil
	}
	if err := validate(req, false); err != nil {
		return nil, err
	}
	rt, err := g.openCheck(req)
	if err != nil {
		return nil, err
	}
	var rep *graph.Report
	if req.WorkItem != "" {
		// Marked where check --recompute says the item stands, as
		// `loopctl graph show` marks it.
		if rep, err = rt.Status(ctx, req.WorkItem, true); err != nil {
			return nil, err
		}
	}
	v := loop.NewGraphView(rt.Graph(), rep)
	return &v, nil
}

// Status is `loopctl graph status ID --format json`.
func (g *Graphs) Status(ctx context.Context, req api.GraphRequest) (*graph.Report, error) {
	if err := validate(req, true); err != nil {
		return nil, err
	}
	rt, err := g.openCheck(req)
	if err != nil {
		return nil, err
	}
	return rt.Status(ctx, req.WorkItem, false)
}

// Complete is `loopctl graph complete ID [--node N] [--actor A]` (actor
// defaults to "api").
func (g *Graphs) Complete(ctx context.Context, req api.CompleteRequest) (*graph.Claim, error) {
	if err := validate(req.GraphRequest, true); err != nil {
		return nil, err
	}
	if req.Actor == "" {
		req.Actor = "api"
	}
	rt, err := g.openLive(req.GraphRequest)
	if err != nil {
		return nil, err
	}
	claim, err := rt.Complete(ctx, req.WorkItem, req.Node, req.Actor)
	return claim, loop.ExplainGraphError(err)
}

// Advance is `loopctl graph advance ID`: no event, so human gates wait.
func (g *Graphs) Advance(ctx context.Context, req api.GraphRequest) (*graph.StepReport, error) {
	if err := validate(req, true); err != nil {
		return nil, err
	}
	rt, err := g.openLive(req)
	if err != nil {
		return nil, err
	}
	rep, err := rt.Advance(ctx, req.WorkItem, nil)
	if errors.Is(err, graph.ErrNotStarted) {
		return nil, fmt.Errorf("%w: %v", ErrBadRequest, loop.ExplainGraphError(err))
	}
	return rep, loop.ExplainGraphError(err)
}

// Force is `loopctl graph force ID --to N --reason R`.
func (g *Graphs) Force(ctx context.Context, req api.ForceRequest) (*graph.ForceResult, error) {
	if err := validate(req.GraphRequest, true); err != nil {
		return nil, err
	}
	if req.To == "" {
		return nil, badRequest("toNode is required")
	}
	rt, err := g.openLive(req.GraphRequest)
	if err != nil {
		return nil, err
	}
	return rt.Force(ctx, req.WorkItem, graph.ForceRequest{To: req.To, Reason: req.Reason, Actor: req.Actor})
}

// Skip is `loopctl graph skip ID --node N… --reason R`.
func (g *Graphs) Skip(ctx context.Context, req api.SkipRequest) (*graph.SkipResult, error) {
	if err := validate(req.GraphRequest, true); err != nil {
		return nil, err
	}
	if len(req.Nodes) == 0 {
		return nil, badRequest("name at least one node or skip set in nodes")
	}
	rt, err := g.openLive(req.GraphRequest)
	if err != nil {
		return nil, err
	}
	return rt.DeclareSkips(ctx, req.WorkItem, req.Nodes, req.Reason, req.Actor)
}
