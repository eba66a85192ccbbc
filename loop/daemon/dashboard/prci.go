package dashboard

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/theloop-dev/theloop/ingress"
)

// PR and CI on the board: what the webhooks say about a work item's pull
// requests — their state, the review state and the checks (check runs,
// check suites and commit statuses) — kept in memory per work item from
// the events the daemon routes (PRCI.Note), and shown on the item's row.
// The payloads are untrusted: only bounded names, states and http(s)
// links are kept, and they reach the page escaped.

// PullRequest is a work item's pull request as the board shows it.
type PullRequest struct {
	Number int
	URL    string
	// State is open, closed or merged ("" unknown).
	State string
	// Review is the latest review verdict: approved, changes_requested,
	// commented ("" none).
	Review string
	// Passing, Failing and Pending count the checks; FailingName and
	// FailingURL name the first failing one.
	Passing, Failing, Pending int
	FailingName, FailingURL   string
	// Checks are every check in the order first reported (the item page
	// lists the failing and pending ones).
	Checks []Check
}

// Check is one check run or commit status of a pull request's head.
type Check struct {
	Name string
	// Verdict is passing, failing or pending.
	Verdict string
	URL     string
}

// Summary is the row's one-line text: "#5 open · checks 3✓ 1✗ (lint) · approved".
func (p PullRequest) Summary() string {
	var b strings.Builder
	fmt.Fprintf(&b, "#%d", p.Number)
	if p.State != "" {
		b.WriteString(" " + p.State)
	}
	if n := p.Passing + p.Failing + p.Pending; n > 0 {
		fmt.Fprintf(&b, " · checks %d passing", p.Passing)
		if p.Failing > 0 {
			fmt.Fprintf(&b, ", %d failing (%s)", p.Failing, p.FailingName)
		}
		if p.Pending > 0 {
			fmt.Fprintf(&b, ", %d pending", p.Pending)
		}
	}
	if p.Review != "" {
		b.WriteString(" · review " + strings.ReplaceAll(p.Review, "_", " "))
	}
	return b.String()
}

type checkState struct {
	verdict string // passing, failing, pending
	url     string
}

type prState struct {
	number        int
	url, state    string
	review        string
	sha           string
	checks        map[string]checkState // check name → latest
	checkOrdering []string
}

// PRCI keeps the pull requests and checks per work item. Its zero value
// is ready; it is safe for concurrent use.
type PRCI struct {
	mu    sync.Mutex
	items map[string]map[int]*prState // work item ref → PR number → state
	shas  map[string]int              // head sha → PR number (for statuses)
}

// bounds on what an event may add.
const (
	maxPRsPerItem  = 20
	maxChecksPerPR = 100
	maxPRCIItems   = 20000
)

// Note records what one routed event says, for the work items it
// concerns, and reports whether that changed anything shown (the reconcile
// pass re-reads the same facts every cycle). What an event says is its
// kind's PR/CI meaning in the table of event kinds (ingress.KindOf); events
// that mean nothing here and unparseable payloads are ignored.
func (t *PRCI) Note(event string, refs []string, payload []byte) (changed bool) {
	fact := ingress.KindOf(event).PRCI
	if len(refs) == 0 || len(payload) == 0 {
		return false
	}
	var p struct {
		Action      string `json:"action"`
		PullRequest *struct {
			Number  int    `json:"number"`
			HTMLURL string `json:"html_url"`
			State   string `json:"state"`
			Merged  bool   `json:"merged"`
			Head    struct {
				SHA string `json:"sha"`
			} `json:"head"`
		} `json:"pull_request"`
		Review *struct {
			State string `json:"state"`
		} `json:"review"`
		CheckRun *struct {
			Name       string `json:"name"`
			Status     string `json:"status"`
			Conclusion string `json:"conclusion"`
			HTMLURL    string `json:"html_url"`
			HeadSHA    string `json:"head_sha"`
			Suite      struct {
				PullRequests []struct {
					Number int `json:"number"`
				} `json:"pull_requests"`
			} `json:"check_suite"`
			PullRequests []struct {
				Number int `json:"number"`
			} `json:"pull_requests"`
		} `json:"check_run"`
		State     string `json:"state"`
		Context   string `json:"context"`
		TargetURL string `json:"target_url"`
		SHA       string `json:"sha"`
	}
	if json.Unmarshal(payload, &p) != nil {
		return false
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.items == nil {
		t.items, t.shas = map[string]map[int]*prState{}, map[string]int{}
	}
	pr := func(ref string, n int) *prState {
		if n <= 0 {
			return nil
		}
		m := t.items[ref]
		if m == nil {
			if len(t.items) >= maxPRCIItems {
				return nil
			}
			m = map[int]*prState{}
			t.items[ref] = m
		}
		s := m[n]
		if s == nil {
			if len(m) >= maxPRsPerItem {
				return nil
			}
			s = &prState{number: n, checks: map[string]checkState{}}
			m[n] = s
			changed = true
		}
		return s
	}
	check := func(s *prState, name string, c checkState) {
		if s == nil || name == "" {
			return
		}
		name = clip(name, 80)
		if _, ok := s.checks[name]; !ok {
			if len(s.checks) >= maxChecksPerPR {
				return
			}
			s.checkOrdering = append(s.checkOrdering, name)
		}
		if s.checks[name] != c {
			changed = true
		}
		s.checks[name] = c
	}
	for _, ref := range refs {
		switch fact {
		case ingress.PRCIPullRequest, ingress.PRCIReview:
			if p.PullRequest == nil {
				continue
			}
			s := pr(ref, p.PullRequest.Number)
			if s == nil {
				continue
			}
			was := [3]string{s.url, s.state, s.review}
			s.url = webURL(p.PullRequest.HTMLURL)
			switch {
			case p.PullRequest.Merged:
				s.state = "merged"
			case p.PullRequest.State == "open" || p.PullRequest.State == "closed":
				s.state = p.PullRequest.State
			}
			if sha := p.PullRequest.Head.SHA; len(sha) == 40 {
				s.sha = sha
				t.shas[sha] = s.number
			}
			if fact == ingress.PRCIReview && p.Review != nil && p.Action == "submitted" {
				switch st := strings.ToLower(p.Review.State); st {
				case "approved", "changes_requested", "commented":
					s.review = st
				}
			}
			if was != [3]string{s.url, s.state, s.review} {
				changed = true
			}
		case ingress.PRCICheckRun:
			if p.CheckRun == nil {
				continue
			}
			c := checkState{verdict: verdictOf(p.CheckRun.Status, p.CheckRun.Conclusion), url: webURL(p.CheckRun.HTMLURL)}
			prs := append(p.CheckRun.PullRequests, p.CheckRun.Suite.PullRequests...)
			if len(prs) == 0 {
				if n, ok := t.shas[p.CheckRun.HeadSHA]; ok {
					check(pr(ref, n), p.CheckRun.Name, c)
				}
			}
			for _, x := range prs {
				check(pr(ref, x.Number), p.CheckRun.Name, c)
			}
		case ingress.PRCIStatus:
			n, ok := t.shas[p.SHA]
			if !ok {
				continue
			}
			v := map[string]string{"success": "passing", "failure": "failing", "error": "failing", "pending": "pending"}[p.State]
			if v != "" {
				check(pr(ref, n), p.Context, checkState{verdict: v, url: webURL(p.TargetURL)})
			}
		}
	}
	return changed
}

func verdictOf(status, conclusion string) string {
	if status != "completed" {
		return "pending"
	}
	switch conclusion {
	case "success", "neutral", "skipped":
		return "passing"
	}
	return "failing"
}

// PullRequests returns ref's pull requests, by number.
func (t *PRCI) PullRequests(ref string) []PullRequest {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []PullRequest
	for _, s := range t.items[ref] {
		p := PullRequest{Number: s.number, URL: s.url, State: s.state, Review: s.review}
		for _, name := range s.checkOrdering {
			c := s.checks[name]
			p.Checks = append(p.Checks, Check{Name: name, Verdict: c.verdict, URL: c.url})
			switch c.verdict {
			case "passing":
				p.Passing++
			case "failing":
				p.Failing++
				if p.FailingName == "" {
					p.FailingName, p.FailingURL = name, c.url
				}
			default:
				p.Pending++
			}
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Number < out[j].Number })
	return out
}
