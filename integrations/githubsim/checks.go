package githubsim

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// Pull requests as a list, and the checks of a commit: the check runs CI
// reports on a pull request's head and the commit statuses older CI posts.
// A check is set through the Go API (SetCheckRun, SetStatus) by a test
// playing CI, and sends check_run / status webhooks like GitHub; the REST
// side serves what a poller reads when those webhooks were missed:
//
//	GET /repos/{o}/{r}/pulls?state=&per_page=&page=    newest first, paginated
//	GET /repos/{o}/{r}/commits/{sha}/check-runs         {total_count, check_runs}
//	GET /repos/{o}/{r}/commits/{sha}/status             the combined status
//
// Faults (InjectFault) match these paths like any other.

// CheckRun is one check run on a pull request's head commit.
type CheckRun struct {
	ID   int64
	Name string
	// Status is queued, in_progress or completed (default completed).
	Status string
	// Conclusion is set when completed: success, failure, neutral,
	// cancelled, skipped, timed_out or action_required.
	Conclusion string
	// HeadSHA is the commit it ran on (set by SetCheckRun).
	HeadSHA string
}

// Status is one commit status (a context and its state).
type Status struct {
	Context string
	// State is pending, success, failure or error.
	State     string
	TargetURL string
}

type commitChecks struct {
	runs     []*CheckRun
	statuses []*Status
}

// HeadSHA is the head commit of pull request number (the sha its checks
// are reported on).
func (s *Server) HeadSHA(full string, number int) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.pullFor(full, number)
	if err != nil {
		return "", err
	}
	return headSHA(rp, is), nil
}

func headSHA(rp *repo, is *issue) string {
	return fakeSHA(rp.full(), fmt.Sprint(is.number), is.head)
}

func (s *Server) checksOf(rp *repo, sha string) *commitChecks {
	if rp.checks == nil {
		rp.checks = map[string]*commitChecks{}
	}
	c := rp.checks[sha]
	if c == nil {
		c = &commitChecks{}
		rp.checks[sha] = c
	}
	return c
}

// SetCheckRun creates or (same name) updates a check run on the head of
// pull request number and sends check_run.completed when it is completed,
// else check_run.created (GitHub has no action for a run that moved on
// without completing). With
// webhook false nothing is sent: CI whose webhook GitHub lost.
func (s *Server) SetCheckRun(full string, number int, cr CheckRun, webhook bool) (CheckRun, error) {
	if strings.TrimSpace(cr.Name) == "" || len(cr.Name) > 200 {
		return CheckRun{}, fmt.Errorf("%w: a check run needs a name of 1–200 characters", ErrInvalid)
	}
	switch cr.Status {
	case "":
		cr.Status = "completed"
	case "queued", "in_progress", "completed":
	default:
		return CheckRun{}, fmt.Errorf("%w: check run status %q (queued, in_progress or completed)", ErrInvalid, clip(cr.Status, 30))
	}
	if cr.Status == "completed" && !slices.Contains([]string{"success", "failure", "neutral", "cancelled", "skipped", "timed_out", "action_required"}, cr.Conclusion) {
		return CheckRun{}, fmt.Errorf("%w: a completed check run needs a conclusion (success, failure, neutral, cancelled, skipped, timed_out or action_required), not %q", ErrInvalid, clip(cr.Conclusion, 30))
	}
	if cr.Status != "completed" {
		cr.Conclusion = ""
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.pullFor(full, number)
	if err != nil {
		return CheckRun{}, err
	}
	cr.HeadSHA = headSHA(rp, is)
	cc := s.checksOf(rp, cr.HeadSHA)
	action := "created"
	if i := slices.IndexFunc(cc.runs, func(r *CheckRun) bool { return r.Name == cr.Name }); i >= 0 {
		cr.ID = cc.runs[i].ID
		*cc.runs[i] = cr
	} else {
		cr.ID = s.newID()
		cp := cr
		cc.runs = append(cc.runs, &cp)
	}
	if cr.Status == "completed" {
		action = "completed"
	}
	if webhook {
		s.emit("check_run", action, rp, nil, nil, s.cfg.BotLogin, map[string]any{"check_run": s.checkRunJSON(rp, is, &cr)})
	}
	return cr, nil
}

// SetStatus sets a commit status (one per context) on the head of pull
// request number and, with webhook, sends a status event.
func (s *Server) SetStatus(full string, number int, st Status, webhook bool) error {
	if strings.TrimSpace(st.Context) == "" || len(st.Context) > 200 {
		return fmt.Errorf("%w: a status needs a context of 1–200 characters", ErrInvalid)
	}
	if !slices.Contains([]string{"pending", "success", "failure", "error"}, st.State) {
		return fmt.Errorf("%w: status state %q (pending, success, failure or error)", ErrInvalid, clip(st.State, 30))
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	rp, is, err := s.pullFor(full, number)
	if err != nil {
		return err
	}
	sha := headSHA(rp, is)
	cc := s.checksOf(rp, sha)
	if i := slices.IndexFunc(cc.statuses, func(x *Status) bool { return x.Context == st.Context }); i >= 0 {
		*cc.statuses[i] = st
	} else {
		cp := st
		cc.statuses = append(cc.statuses, &cp)
	}
	if webhook {
		s.emit("status", "", rp, nil, nil, s.cfg.BotLogin, map[string]any{
			"sha": sha, "state": st.State, "context": st.Context, "target_url": nilIfEmpty(st.TargetURL), "description": nil,
			"branches": []any{map[string]any{"name": is.head, "commit": map[string]any{"sha": sha}}},
		})
	}
	return nil
}

func nilIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// checkRunJSON is a check run as the checks API and check_run webhooks
// carry it (the run's pull_requests list its pull request, as GitHub's do
// for a branch of the repository itself).
func (s *Server) checkRunJSON(rp *repo, is *issue, cr *CheckRun) map[string]any {
	api := s.apiURL() + "/repos/" + rp.full()
	web := fmt.Sprintf("%s/%s/runs/%d", s.cfg.WebURL, rp.full(), cr.ID)
	var concl any
	if cr.Conclusion != "" {
		concl = cr.Conclusion
	}
	var prs []any
	if is != nil && is.headRepo == "" {
		prs = append(prs, map[string]any{"number": is.number, "url": fmt.Sprintf("%s/pulls/%d", api, is.number),
			"head": map[string]any{"ref": is.head, "sha": cr.HeadSHA}, "base": map[string]any{"ref": is.base}})
	}
	suite := map[string]any{"id": cr.ID, "head_sha": cr.HeadSHA, "status": cr.Status, "conclusion": concl, "pull_requests": prs}
	if is != nil {
		suite["head_branch"] = is.head
	}
	return map[string]any{
		"id": cr.ID, "name": cr.Name, "head_sha": cr.HeadSHA, "status": cr.Status, "conclusion": concl,
		"url": fmt.Sprintf("%s/check-runs/%d", api, cr.ID), "html_url": web, "details_url": web,
		"pull_requests": prs, "check_suite": suite,
	}
}

// prOfSHA finds the pull request whose head is sha (nil for none).
func prOfSHA(rp *repo, sha string) *issue {
	for _, is := range rp.issues {
		if is.pr && headSHA(rp, is) == sha {
			return is
		}
	}
	return nil
}

func (s *Server) listPulls(w http.ResponseWriter, r *http.Request, rp *repo) {
	state := r.URL.Query().Get("state")
	switch state {
	case "":
		state = "open"
	case "open", "closed", "all":
	default:
		unprocessable(w, "state must be open, closed or all")
		return
	}
	nums := make([]int, 0, len(rp.issues))
	for n, is := range rp.issues {
		if is.pr && (state == "all" || is.state == state) {
			nums = append(nums, n)
		}
	}
	slices.Sort(nums)
	slices.Reverse(nums)
	items := make([]any, 0, len(nums))
	for _, n := range nums {
		items = append(items, s.pullJSON(rp, rp.issues[n]))
	}
	s.paginate(w, r, items)
}

func (s *Server) listCheckRuns(w http.ResponseWriter, r *http.Request, rp *repo) {
	sha := r.PathValue("sha")
	is := prOfSHA(rp, sha)
	runs := []any{}
	if cc := rp.checks[sha]; cc != nil {
		for _, cr := range cc.runs {
			runs = append(runs, s.checkRunJSON(rp, is, cr))
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"total_count": len(runs), "check_runs": runs})
}

// combinedStatus is GitHub's: failure when any status failed or errored,
// pending when any is pending (or there are none), else success.
func (s *Server) combinedStatus(w http.ResponseWriter, r *http.Request, rp *repo) {
	sha := r.PathValue("sha")
	statuses := []any{}
	state := "pending"
	if cc := rp.checks[sha]; cc != nil && len(cc.statuses) > 0 {
		state = "success"
		for _, st := range cc.statuses {
			switch st.State {
			case "failure", "error":
				state = "failure"
			case "pending":
				if state == "success" {
					state = "pending"
				}
			}
			statuses = append(statuses, map[string]any{"context": st.Context, "state": st.State, "target_url": nilIfEmpty(st.TargetURL), "description": nil})
		}
	}
	writeJSON(w, http.StatusOK, map[string]any{"state": state, "sha": sha, "total_count": len(statuses), "statuses": statuses,
		"repository": s.repoJSON(rp), "commit_url": s.apiURL() + "/repos/" + rp.full() + "/commits/" + sha,
		"url": s.apiURL() + "/repos/" + rp.full() + "/commits/" + sha + "/status"})
}
