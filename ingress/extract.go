package ingress

import (
	"slices"
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/internal/lazyre"
	"github.com/theloop-dev/theloop/workitem"
)

// refSourceOrder lists the sources in the order their bits are assigned.
var refSourceOrder = []RefSource{RefFromEntity, RefFromClosingReference, RefFromBranch, RefFromKeyword}

func sourceBit(src RefSource) uint8 {
	for i, s := range refSourceOrder {
		if s == src {
			return 1 << i
		}
	}
	return 0
}

// extraction is the refs of one payload in order, each with the set of its
// sources (bits of refSourceOrder).
type extraction struct {
	refs    []workitem.Ref
	sources []uint8
	// own is the PR's own ref (excluded from its closing references).
	own workitem.Ref
}

func (x *extraction) add(r workitem.Ref, src RefSource) {
	if r.Number <= 0 || r.Number > workitem.MaxNumber || !workitem.ValidName(r.Owner) || !workitem.ValidName(r.Repo) ||
		(r.Host != "" && !workitem.ValidHost(r.Host)) {
		return // not a ref workitem.Parse would accept
	}
	if src != RefFromEntity && x.own.Number != 0 && sameRef(r, x.own) {
		return // a PR's reference to itself
	}
	for i, have := range x.refs {
		if sameRef(have, r) {
			x.sources[i] |= sourceBit(src)
			return
		}
	}
	x.refs = append(x.refs, r)
	x.sources = append(x.sources, sourceBit(src))
}

// branchOnly returns the refs whose only source is the branch convention:
// weak links the daemon verifies before acting (docs/daemon.md §6.2).
func (x *extraction) branchOnly() []workitem.Ref {
	var out []workitem.Ref
	for i, s := range x.sources {
		if s == sourceBit(RefFromBranch) {
			out = append(out, x.refs[i])
		}
	}
	return out
}

// sourcesOf lists the sources of the i-th ref, in refSourceOrder.
func (x *extraction) sourcesOf(i int) []RefSource {
	var out []RefSource
	for b, s := range refSourceOrder {
		if x.sources[i]&(1<<b) != 0 {
			out = append(out, s)
		}
	}
	return out
}

// sameRef compares refs as GitHub does: names case-insensitively.
func sameRef(a, b workitem.Ref) bool {
	return a.Number == b.Number && a.Provider == b.Provider && strings.EqualFold(a.Host, b.Host) &&
		strings.EqualFold(a.Owner, b.Owner) && strings.EqualFold(a.Repo, b.Repo)
}

// repoOf is the event's repository.
type repoOf struct {
	host, owner, repo string
}

func (r repoOf) ref(n int) workitem.Ref {
	return workitem.Ref{Provider: "github", Host: r.host, Owner: r.owner, Repo: r.repo, Number: n}
}

// hostOfURL returns the lower-cased host of an http(s) URL, "" for
// github.com or anything unparseable.
func hostOfURL(s string) string {
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
	if h == workitem.DefaultGitHubHost || h == "" || strings.ContainsAny(h, "@ \t") {
		return ""
	}
	return h
}

// payload is the top-level fields of a webhook payload the router reads,
// with the issue and pull-request objects read once.
type payload struct {
	doc                                                *doc
	root                                               jv
	action, repository, sender, comment, review, label jv
	issue, pullRequest                                 itemObject
	// tops are the values of payloadKeys[:ntops], in its order.
	tops  [maxPayloadKeys]jv
	ntops int
}

// itemObject is the fields read from an issue or pull-request object.
type itemObject struct {
	present                                                   bool
	number, closing, head, headRefName, body, labels, htmlURL jv
	// pullRequest is an issue's pull_request key (set on PRs).
	pullRequest jv
	// updatedAt and closedAt identify a change (Event.Change).
	updatedAt, closedAt jv
	// all are the values of entityKeys, in its order.
	all [10]jv
}

// payloadKeys are the top-level keys read in one pass: the router's, then
// the containers the table's built-in kinds read refs from (a kind
// registered later has its container looked up).
var payloadKeys = withRefContainers([]string{"action", "repository", "sender", "comment", "review", "issue", "pull_request", "label"})

// withRefContainers appends to keys the top-level payload keys the table's
// ref rules start from.
func withRefContainers(keys []string) []string {
	for _, k := range Kinds() {
		for _, r := range k.Refs {
			if !slices.Contains(keys, r.Path[0]) {
				keys = append(keys, r.Path[0])
			}
		}
	}
	return keys
}

var entityKeys = []string{"number", "closingIssuesReferences", "head", "headRefName", "body", "labels", "html_url", "pull_request",
	"updated_at", "closed_at"}

func readEntity(d *doc, v jv) itemObject {
	if v.kind() != '{' {
		return itemObject{}
	}
	var f [10]jv
	d.fields(v, entityKeys, f[:])
	return itemObject{true, f[0], f[1], f[2], f[3], f[4], f[5], f[6], f[7], f[8], f[9], f}
}

// changeOf is the Event.Change of an issues or pull_request delivery ("" for
// any other, or when the payload lacks what identifies the change).
func changeOf(name, action string, p *payload) string {
	e := &p.issue
	switch name {
	case KindIssues:
	case KindPullRequest:
		e = &p.pullRequest
	default:
		return ""
	}
	n := intOf(e.number)
	if n <= 0 {
		return ""
	}
	id := "#" + strconv.Itoa(n)
	at := e.updatedAt.string()
	switch action {
	case "opened":
		return id
	case "labeled", "unlabeled":
		l := p.label.get("name").string()
		if l == "" || at == "" {
			return ""
		}
		return id + "/" + l + "@" + at
	case "closed":
		if c := e.closedAt.string(); c != "" {
			at = c
		}
		fallthrough
	case "reopened":
		if at == "" {
			return ""
		}
		return id + "@" + at
	}
	return ""
}

// maxPayloadKeys bounds payloadKeys for the fixed array readPayload fills.
const maxPayloadKeys = 16

// readPayload reads the top level of a validated JSON object (d.idx, when
// set, is validate's index of d.b).
func readPayload(d *doc) (payload, bool) {
	v := jv(d.b[skipWS(d.b, 0):])
	if v.kind() != '{' {
		return payload{}, false
	}
	p := payload{doc: d, root: v, ntops: min(len(payloadKeys), maxPayloadKeys)}
	f := p.tops[:p.ntops]
	d.fields(v, payloadKeys[:p.ntops], f)
	p.action, p.repository, p.sender, p.comment, p.review, p.label = f[0], f[1], f[2], f[3], f[4], f[7]
	p.issue, p.pullRequest = readEntity(d, f[5]), readEntity(d, f[6])
	return p, true
}

// top is the value of a top-level key: read in readPayload's pass when it
// is one of payloadKeys, else looked up.
func (p *payload) top(key string) jv {
	for i, k := range payloadKeys[:p.ntops] {
		if k == key {
			return p.tops[i]
		}
	}
	return p.doc.get(p.root, key)
}

// path walks a path from the payload's top level; a field of the issue or
// pull-request object is the one readPayload read.
func (p *payload) path(keys []string) jv {
	if len(keys) == 0 {
		return nil
	}
	var e *itemObject
	switch keys[0] {
	case payloadKeys[5]:
		e = &p.issue
	case payloadKeys[6]:
		e = &p.pullRequest
	}
	if e != nil && len(keys) > 1 {
		if !e.present {
			return nil
		}
		for i, k := range entityKeys {
			if k == keys[1] {
				return e.all[i].path(keys[2:]...)
			}
		}
	}
	return p.top(keys[0]).path(keys[1:]...)
}

var repoKeys = []string{"full_name", "html_url"}

// payloadRepo reads repository.full_name and the host (docs/daemon.md §4.1).
func payloadRepo(p *payload, e *itemObject) (repoOf, bool) {
	var f [2]jv
	p.doc.fields(p.repository, repoKeys, f[:])
	owner, repo, ok := strings.Cut(f[0].string(), "/")
	if !ok || !workitem.ValidName(owner) || !workitem.ValidName(repo) {
		return repoOf{}, false
	}
	host := ""
	if u := f[1].string(); u != "" {
		host = hostOfURL(u)
	} else if e != nil {
		host = hostOfURL(e.htmlURL.string())
	}
	if host != "" && !workitem.ValidHost(host) {
		return repoOf{}, false
	}
	return repoOf{host: host, owner: owner, repo: repo}, true
}

// prEntity returns the pull-request object of the payload, if any: the
// pull_request object for the kinds whose entity it is (EventKind.OnPR);
// for the others the issue when it has a pull_request key, else a
// top-level pull_request (the poll path's shape).
func prEntity(k *EventKind, p *payload) *itemObject {
	switch {
	case k.OnPR:
		if p.pullRequest.present {
			return &p.pullRequest
		}
	case p.issue.present:
		if p.issue.pullRequest != nil {
			return &p.issue
		}
	case p.pullRequest.present:
		return &p.pullRequest
	}
	return nil
}

// intOf reads a positive int that fits a ref number (0 otherwise).
func intOf(v jv) int {
	n, ok := v.int()
	if !ok || n <= 0 || n >= 1<<31 {
		return 0
	}
	return int(n)
}

// extract returns the work items of a payload, in docs/daemon.md §4.1 order:
// a pull request's, else those the kind's RefRules name.
func extract(k *EventKind, p *payload, r repoOf) extraction {
	var x extraction
	if pr := prEntity(k, p); pr != nil {
		n := intOf(pr.number)
		if n > 0 {
			x.own = r.ref(n)
		}
		pr.closing.elems(func(c jv) {
			if cn := intOf(c.get("number")); cn > 0 {
				x.add(closingRepo(c, r).ref(cn), RefFromClosingReference)
			}
		})
		head := pr.head.get("ref").string()
		if head == "" {
			head = pr.headRefName.string()
		}
		if b := branchIssue(head); b > 0 {
			x.add(r.ref(b), RefFromBranch)
		}
		for _, kr := range closingKeywords(pr.body.string(), r) {
			x.add(kr, RefFromKeyword)
		}
		if n > 0 {
			x.add(r.ref(n), RefFromEntity)
		}
		return x
	}
	for _, rule := range k.Refs {
		v := p.path(rule.Path)
		if rule.Each == nil {
			x.rule(v, rule.From, r)
			continue
		}
		v.elems(func(e jv) { x.rule(e.path(rule.Each...), rule.From, r) })
	}
	return x
}

// rule adds the ref one RefRule's value names.
func (x *extraction) rule(v jv, from RefSource, r repoOf) {
	switch from {
	case RefFromEntity:
		if n := intOf(v); n > 0 {
			x.add(r.ref(n), RefFromEntity)
		}
	case RefFromBranch:
		x.branch(v, r)
	}
}

func (x *extraction) branch(name jv, r repoOf) {
	if n := branchIssue(name.string()); n > 0 {
		x.add(r.ref(n), RefFromBranch)
	}
}

// closingRepo resolves the repository of a closingIssuesReferences entry:
// repository.nameWithOwner, else repository.owner.login + name, else the
// /<o>/<r>/issues/<n> part of url, else the event's repository.
func closingRepo(c jv, r repoOf) repoOf {
	repo := c.get("repository")
	if o, n, ok := strings.Cut(repo.get("nameWithOwner").string(), "/"); ok && workitem.ValidName(o) && workitem.ValidName(n) {
		return repoOf{host: r.host, owner: o, repo: n}
	}
	if o, n := repo.path("owner", "login").string(), repo.get("name").string(); workitem.ValidName(o) && workitem.ValidName(n) {
		return repoOf{host: r.host, owner: o, repo: n}
	}
	if u := c.get("url").string(); u != "" {
		if m := issueURLRE.FindStringSubmatch(u); m != nil && workitem.ValidName(m[1]) && workitem.ValidName(m[2]) {
			return repoOf{host: r.host, owner: m[1], repo: m[2]}
		}
	}
	return r
}

var issueURLRE = lazyre.New(`/([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+)/issues/\d+`)

// branchIssue returns n for the first issue-<n> or issue/<n> in a branch
// name (case-insensitive), 0 when there is none.
func branchIssue(b string) int {
	for i := 0; i+6 < len(b); i++ {
		if b[i]|0x20 != 'i' || !strings.EqualFold(b[i:i+5], "issue") || (b[i+5] != '-' && b[i+5] != '/') {
			continue
		}
		j := i + 6
		for j < len(b) && b[j] >= '0' && b[j] <= '9' && j-(i+6) < 10 {
			j++
		}
		if j == i+6 {
			continue
		}
		n, err := strconv.Atoi(b[i+6 : j])
		if err != nil || n <= 0 || n >= 1<<31 {
			continue
		}
		return n
	}
	return 0
}

// closingKeywordRE: GitHub's closing keywords, word-bounded, an optional
// colon, whitespace, then a URL, [owner/repo]#n or GH-n (docs/daemon.md §4.1).
// It is the router's superset of integrations' body fallback (which serves
// the github.closing-issues operation and does not read GH-n).
var closingKeywordRE = lazyre.New(`(?i)\b(?:close[sd]?|fix(?:e[sd])?|resolve[sd]?):?[ \t\r\n]+(?:https?://([A-Za-z0-9.:-]+)/([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+)/issues/(\d+)|(?:([A-Za-z0-9._-]+)/([A-Za-z0-9._-]+))?#(\d+)|GH-(\d+))\b`)

// maxKeywordScan bounds how much of a PR body is searched for keywords.
const maxKeywordScan = 64 << 10

func closingKeywords(body string, r repoOf) []workitem.Ref {
	if len(body) == 0 {
		return nil
	}
	if len(body) > maxKeywordScan {
		body = body[:maxKeywordScan]
	}
	var out []workitem.Ref
	webHost := r.host
	if webHost == "" {
		webHost = workitem.DefaultGitHubHost
	}
	for _, m := range closingKeywordRE.FindAllStringSubmatch(body, 32) {
		var ref workitem.Ref
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
