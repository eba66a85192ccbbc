package apiserver

import (
	"fmt"
	"net/http"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/api"
)

// The reads the-loop's API offers beside the graph verbs (docs/daemon.md
// §13): loopd's work items, the event names of its log, and a
// repository's scenarios, instructions and critics. They go through route
// like every other verb — the socket's authorization, one api.request
// event each — and change nothing. A critic is never run by loopd: the
// run verb answers its plan only (dryRun), for `loopctl critic run` in
// the agent's world.

func (s *Server) routeReads() {
	s.route("GET "+api.WorkItemsPath, s.workItems)
	s.route("GET "+api.WorkItemPath, s.workItem)
	s.route("GET "+api.EventTypesPath, s.eventTypes)
	s.route("GET "+api.RepoScenariosPath, s.repoScenarios)
	s.route("GET "+api.RepoInstructionsPath, s.repoInstructions)
	s.route("GET "+api.RepoCriticsPath, s.repoCritics)
	s.route("POST "+api.RepoCriticsRunPath, s.repoCriticsRun)
}

func (s *Server) workItems(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.WorkItems == nil {
		return nil, unavailable("the work-item list")
	}
	items, err := s.b.WorkItems(r.Context())
	if items == nil {
		items = []api.WorkItem{}
	}
	return items, err
}

func (s *Server) workItem(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.WorkItems == nil {
		return nil, unavailable("the work-item list")
	}
	ref, err := refParam(r)
	if err != nil {
		return nil, err
	}
	items, err := s.b.WorkItems(r.Context())
	if err != nil {
		return nil, err
	}
	for _, it := range items {
		if strings.EqualFold(it.Ref, ref) {
			return it, nil
		}
	}
	return nil, notFound("no work item %s is known to loopd", ref)
}

// eventTypes counts the event log's names (one pass over the log).
func (s *Server) eventTypes(_ http.ResponseWriter, r *http.Request) (any, error) {
	if s.b.EventLogPath == "" {
		return nil, unavailable("the event log")
	}
	if s.b.FlushEventLog != nil {
		s.b.FlushEventLog()
	}
	byName := map[string]*api.EventType{}
	_, err := loop.ScanEvents(s.b.EventLogPath, loop.EventQuery{}, func(rec loop.EventRecord) error {
		t := byName[rec.Event]
		if t == nil {
			t = &api.EventType{Name: rec.Event}
			byName[rec.Event] = t
		}
		t.Count++
		if rec.Time.After(t.Last) {
			t.Last = rec.Time
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := make([]api.EventType, 0, len(byName))
	for _, t := range byName {
		out = append(out, *t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func notFound(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrNotFound, fmt.Sprintf(format, args...))
}

func forbidden(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrForbidden, fmt.Sprintf(format, args...))
}

// repoParam opens the repository ?repo= names (an absolute path).
func repoParam(r *http.Request, dir string) (*loop.Repo, error) {
	if dir == "" {
		dir = r.URL.Query().Get("repo")
	}
	if dir == "" || !filepath.IsAbs(dir) {
		return nil, badRequest("name the repository by its absolute path: ?repo=/srv/checkouts/widgets")
	}
	return loop.OpenRepo(dir, "")
}

func (s *Server) repoScenarios(_ http.ResponseWriter, r *http.Request) (any, error) {
	repo, err := repoParam(r, "")
	if err != nil {
		return nil, err
	}
	globs, source, warns := loop.ScenarioGlobs(repo.Harness, nil)
	scan, err := loop.FindScenarios(repo.Root, globs)
	if err != nil {
		return nil, badRequest("%v", err)
	}
	scan.Source = source
	scan.Warnings = append(warns, scan.Warnings...)
	return scan, nil
}

func (s *Server) repoInstructions(_ http.ResponseWriter, r *http.Request) (any, error) {
	repo, err := repoParam(r, "")
	if err != nil {
		return nil, err
	}
	entries, warns := loop.InstructionEntries(repo.Harness)
	// No home directory: a repository's "~/…" entry must not make loopd
	// look into its own.
	in := loop.ResolveInstructions(repo.Root, "", entries)
	in.Warnings = append(warns, in.Warnings...)
	return in, nil
}

func criticsOf(repo *loop.Repo) api.RepoCritics {
	critics, warns := loop.Critics(repo.Harness)
	out := api.RepoCritics{Critics: []api.RepoCritic{}, Warnings: warns}
	for _, c := range critics {
		out.Critics = append(out.Critics, api.RepoCritic{Name: c.Name, Harness: c.Harness, Model: c.Model, TimeoutSeconds: int(c.Timeout.Seconds())})
	}
	return out
}

func (s *Server) repoCritics(_ http.ResponseWriter, r *http.Request) (any, error) {
	repo, err := repoParam(r, "")
	if err != nil {
		return nil, err
	}
	return criticsOf(repo), nil
}

// repoCriticsRun plans a critic's run: the prompt the critic gets and the
// section its review goes to. Running it is the agent's side's job.
func (s *Server) repoCriticsRun(_ http.ResponseWriter, r *http.Request) (any, error) {
	var req api.CriticRunRequest
	if err := decode(r, &req); err != nil {
		return nil, err
	}
	if !req.DryRun {
		return nil, forbidden("loopd never runs a critic (a harness over a checkout the agent writes runs in the agent's world): send dryRun: true for the plan, and run it with `loopctl critic run %s --work-item %s` there", req.Critic, req.WorkItem)
	}
	if req.WorkItem == "" || req.Critic == "" {
		return nil, badRequest("workItem and critic are required")
	}
	repo, err := repoParam(r, req.Repo)
	if err != nil {
		return nil, err
	}
	critics := criticsOf(repo)
	i := slices.IndexFunc(critics.Critics, func(c api.RepoCritic) bool { return c.Name == req.Critic })
	if i < 0 {
		names := make([]string, len(critics.Critics))
		for j, c := range critics.Critics {
			names[j] = c.Name
		}
		return nil, badRequest("no critic %q in %s; configured: %s", req.Critic, loop.HarnessConfigFile, strings.Join(names, ", "))
	}
	if err := repo.RequireWorkItem(req.WorkItem); err != nil {
		return nil, err
	}
	rt, err := loop.Open(repo.Root, loop.Options{WorkItem: req.WorkItem})
	if err != nil {
		return nil, err
	}
	g := rt.Graph()
	nodeID := req.Node
	if nodeID == "" {
		rep, err := rt.Status(r.Context(), req.WorkItem, false)
		if err != nil {
			return nil, err
		}
		nodeID = rep.CurrentNode
	}
	node, ok := g.Node(nodeID)
	if !ok {
		return nil, badRequest("node %q is not a node of %s", nodeID, g.Name)
	}
	specDir := path.Join(repo.SpecDir, req.WorkItem)
	arts := loop.CriticArtifacts(repo.Root, specDir)
	c := critics.Critics[i]
	return api.CriticRun{
		Critic: c.Name, Harness: c.Harness, Model: c.Model, Node: node.ID,
		Section: loop.CriticSection(g, node.ID),
		Prompt:  loop.CriticPrompt(node, req.WorkItem, specDir, arts, req.Prompt),
		RunWith: "loopctl critic run " + c.Name + " --work-item " + req.WorkItem + " --node " + node.ID,
	}, nil
}
