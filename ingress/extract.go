package ingress

import (
	"strconv"
	"strings"

	"github.com/valyala/fastjson"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/internal/lazyre"
)

// RefSource says why a ref was extracted (daemon-spec §4.1).
type RefSource string

const (
	RefFromEntity           RefSource = "entity"
	RefFromClosingReference RefSource = "closing-reference"
	RefFromBranch           RefSource = "branch"
	RefFromKeyword          RefSource = "keyword"
)

// extraction is the refs of one payload in order, each with its sources.
type extraction struct {
	refs    []integrations.Ref
	sources [][]RefSource
	// own is the PR's own ref (excluded from its closing references).
	own integrations.Ref
}

func (x *extraction) add(r integrations.Ref, src RefSource) {
	if r.Number <= 0 || r.Number >= 1<<31 || !plainName(r.Owner) || !plainName(r.Repo) {
		return
	}
	if src != RefFromEntity && x.own.Number != 0 && sameRef(r, x.own) {
		return // a PR's reference to itself
	}
	for i, have := range x.refs {
		if sameRef(have, r) {
			for _, s := range x.sources[i] {
				if s == src {
					return
				}
			}
			x.sources[i] = append(x.sources[i], src)
			return
		}
	}
	x.refs = append(x.refs, r)
	x.sources = append(x.sources, []RefSource{src})
}

// sameRef compares refs as GitHub does: names case-insensitively.
func sameRef(a, b integrations.Ref) bool {
	return a.Number == b.Number && a.Provider == b.Provider && strings.EqualFold(a.Host, b.Host) &&
		strings.EqualFold(a.Owner, b.Owner) && strings.EqualFold(a.Repo, b.Repo)
}

// repoOf is the event's repository.
type repoOf struct {
	host, owner, repo string
}

func (r repoOf) ref(n int) integrations.Ref {
	return integrations.Ref{Provider: "github", Host: r.host, Owner: r.owner, Repo: r.repo, Number: n}
}

// hostOfURL returns the lower-cased host of an http(s) URL, "" for
// github.com or anything unparseable.
func hostOfURL(u []byte) string {
	s := string(u)
	rest, ok := strings.CutPrefix(s, "https://")
	if !ok {
		if rest, ok = strings.CutPrefix(s, "http://"); !ok {
			return ""
		}
	}
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		rest = rest[:i]
	}
	h := strings.ToLower(rest)
	if h == "github.com" || h == "" || strings.ContainsAny(h, "@ \t") {
		return ""
	}
	return h
}

// payloadRepo reads repository.full_name and the host (daemon-spec §4.1).
func payloadRepo(v *fastjson.Value, entity *fastjson.Value) (repoOf, bool) {
	full := v.GetStringBytes("repository", "full_name")
	owner, repo, ok := strings.Cut(string(full), "/")
	if !ok || !plainName(owner) || !plainName(repo) {
		return repoOf{}, false
	}
	host := ""
	if u := v.GetStringBytes("repository", "html_url"); len(u) > 0 {
		host = hostOfURL(u)
	} else if entity != nil {
		host = hostOfURL(entity.GetStringBytes("html_url"))
	}
	return repoOf{host: host, owner: owner, repo: repo}, true
}

// prEntity returns the pull-request object of the payload, if any: the
// pull_request object for pull_request* events; for issues and
// issue_comment the issue when it has a pull_request key, else a top-level
// pull_request (the poll path's shape).
func prEntity(event string, v *fastjson.Value) *fastjson.Value {
	if strings.HasPrefix(event, "pull_request") {
		return v.Get("pull_request")
	}
	if is := v.Get("issue"); is != nil && is.Type() == fastjson.TypeObject {
		if is.Get("pull_request") != nil {
			return is
		}
		return nil
	}
	if pr := v.Get("pull_request"); pr != nil && pr.Type() == fastjson.TypeObject {
		return pr
	}
	return nil
}

// extract returns the work items of a payload, in daemon-spec §4.1 order.
func extract(event string, v *fastjson.Value, r repoOf) extraction {
	var x extraction
	if pr := prEntity(event, v); pr != nil {
		n := pr.GetInt("number")
		if n > 0 {
			x.own = r.ref(n)
		}
		for _, c := range pr.GetArray("closingIssuesReferences") {
			num := c.Get("number")
			if num == nil || num.Type() != fastjson.TypeNumber {
				continue
			}
			cn, err := num.Int()
			if err != nil {
				continue
			}
			x.add(closingRepo(c, r).ref(cn), RefFromClosingReference)
		}
		head := pr.GetStringBytes("head", "ref")
		if head == nil {
			head = pr.GetStringBytes("headRefName")
		}
		if n := branchIssue(head); n > 0 {
			x.add(r.ref(n), RefFromBranch)
		}
		for _, kr := range closingKeywords(pr.GetStringBytes("body"), r) {
			x.add(kr, RefFromKeyword)
		}
		if n > 0 {
			x.add(r.ref(n), RefFromEntity)
		}
		return x
	}
	switch event {
	case "issues", "issue_comment":
		if n := v.GetInt("issue", "number"); n > 0 {
			x.add(r.ref(n), RefFromEntity)
		}
	case "workflow_run":
		x.prNumbers(v.GetArray("workflow_run", "pull_requests"), r)
		if n := branchIssue(v.GetStringBytes("workflow_run", "head_branch")); n > 0 {
			x.add(r.ref(n), RefFromBranch)
		}
	case "check_run":
		x.prNumbers(v.GetArray("check_run", "check_suite", "pull_requests"), r)
		if n := branchIssue(v.GetStringBytes("check_run", "check_suite", "head_branch")); n > 0 {
			x.add(r.ref(n), RefFromBranch)
		}
	case "check_suite":
		x.prNumbers(v.GetArray("check_suite", "pull_requests"), r)
		if n := branchIssue(v.GetStringBytes("check_suite", "head_branch")); n > 0 {
			x.add(r.ref(n), RefFromBranch)
		}
	case "status":
		for _, b := range v.GetArray("branches") {
			if n := branchIssue(b.GetStringBytes("name")); n > 0 {
				x.add(r.ref(n), RefFromBranch)
			}
		}
	}
	return x
}

func (x *extraction) prNumbers(prs []*fastjson.Value, r repoOf) {
	for _, p := range prs {
		if n := p.GetInt("number"); n > 0 {
			x.add(r.ref(n), RefFromEntity)
		}
	}
}

// closingRepo resolves the repository of a closingIssuesReferences entry:
// repository.nameWithOwner, else repository.owner.login + name, else the
// /<o>/<r>/issues/<n> part of url, else the event's repository.
func closingRepo(c *fastjson.Value, r repoOf) repoOf {
	if nwo := c.GetStringBytes("repository", "nameWithOwner"); len(nwo) > 0 {
		if o, n, ok := strings.Cut(string(nwo), "/"); ok && plainName(o) && plainName(n) {
			return repoOf{host: r.host, owner: o, repo: n}
		}
	}
	if o, n := c.GetStringBytes("repository", "owner", "login"), c.GetStringBytes("repository", "name"); plainName(string(o)) && plainName(string(n)) {
		return repoOf{host: r.host, owner: string(o), repo: string(n)}
	}
	if u := string(c.GetStringBytes("url")); u != "" {
		if m := issueURLRE.FindStringSubmatch(u); m != nil && plainName(m[1]) && plainName(m[2]) {
			return repoOf{host: r.host, owner: m[1], repo: m[2]}
		}
	}
	return r
}

var issueURLRE = lazyre.New(`/([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+)/issues/\d+`)

// branchIssue returns n for the first issue-<n> or issue/<n> in a branch
// name (case-insensitive), 0 when there is none.
func branchIssue(b []byte) int {
	for i := 0; i+6 < len(b); i++ {
		if b[i]|0x20 != 'i' || !strings.EqualFold(string(b[i:i+5]), "issue") || (b[i+5] != '-' && b[i+5] != '/') {
			continue
		}
		j := i + 6
		for j < len(b) && b[j] >= '0' && b[j] <= '9' && j-(i+6) < 10 {
			j++
		}
		if j == i+6 {
			continue
		}
		n, err := strconv.Atoi(string(b[i+6 : j]))
		if err != nil || n <= 0 || n >= 1<<31 {
			continue
		}
		return n
	}
	return 0
}

// closingKeywordRE: GitHub's closing keywords, word-bounded, an optional
// colon, whitespace, then a URL, [owner/repo]#n or GH-n (daemon-spec §4.1).
// It is the router's superset of integrations' body fallback (which serves
// the github.closing-issues operation and does not read GH-n).
var closingKeywordRE = lazyre.New(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?[ \t\r\n]+(?:https?://([A-Za-z0-9.:-]+)/([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+)/issues/(\d+)|(?:([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+))?#(\d+)|GH-(\d+))\b`)

// maxKeywordScan bounds how much of a PR body is searched for keywords.
const maxKeywordScan = 64 << 10

func closingKeywords(body []byte, r repoOf) []integrations.Ref {
	if len(body) == 0 {
		return nil
	}
	if len(body) > maxKeywordScan {
		body = body[:maxKeywordScan]
	}
	var out []integrations.Ref
	webHost := r.host
	if webHost == "" {
		webHost = "github.com"
	}
	for _, m := range closingKeywordRE.FindAllStringSubmatch(string(body), 32) {
		var ref integrations.Ref
		switch {
		case m[4] != "":
			if !strings.EqualFold(m[1], webHost) {
				continue // a keyword cannot close an issue on another host
			}
			ref = repoOf{host: r.host, owner: m[2], repo: m[3]}.ref(atoiRef(m[4]))
		case m[7] != "":
			rr := r
			if m[5] != "" {
				rr = repoOf{host: r.host, owner: m[5], repo: m[6]}
			}
			ref = rr.ref(atoiRef(m[7]))
		case m[8] != "":
			ref = r.ref(atoiRef(m[8]))
		}
		out = append(out, ref)
	}
	return out
}

func atoiRef(s string) int {
	if len(s) > 10 {
		return 0
	}
	n, err := strconv.Atoi(s)
	if err != nil || n <= 0 || n >= 1<<31 {
		return 0
	}
	return n
}
