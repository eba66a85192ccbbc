package ingress

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/ops"
	"github.com/theloop-dev/theloop/workitem"
)

// Who may approve is GitHub's answer (docs/decisions.md §25). An Authority
// holds routing.authorized: logins, team:ORG/SLUG (team membership),
// permission:write|maintain|admin (the collaborator's role on the
// repository, that role or above) and codeowners (CODEOWNERS on the default
// branch, for the gated artifact's path; teams in it are resolved too).
// GitHub's answers are cached for TTL on the Authority's clock, so a person
// removed from a team loses the right within it. The Router cannot ask
// GitHub (it makes no network call): with rules beyond logins it admits
// every named actor and the daemon asks the Authority before anything
// happens.

// Rule kinds as routing.authorized spells them.
const (
	RuleTeamPrefix       = "team:"
	RulePermissionPrefix = "permission:"
	RuleCodeowners       = "codeowners"
	// RuleAuthorizedUsers is the rule recorded for a login on
	// routing.authorizedUsers.
	RuleAuthorizedUsers = "routing.authorizedUsers"
)

// DefaultAuthorityTTL is how long GitHub's answers are believed.
const DefaultAuthorityTTL = 60 * time.Second

// ErrBadRule: a routing.authorized entry that is not a login nor a rule.
var ErrBadRule = errors.New("ingress: not an authorization rule")

// codeownersPaths are where GitHub reads CODEOWNERS, first found wins.
var codeownersPaths = []string{".github/CODEOWNERS", "CODEOWNERS", "docs/CODEOWNERS"}

var roleRank = map[string]int{"read": 1, "triage": 2, "write": 3, "maintain": 4, "admin": 5}

type authRule struct {
	text       string
	login      string
	org, team  string
	permission string
	codeowners bool
}

// ParseAuthorized checks routing.authorized, naming the offending entry.
func ParseAuthorized(entries []string) error {
	_, err := parseRules(entries)
	return err
}

func parseRules(entries []string) ([]authRule, error) {
	var out []authRule
	var errs []error
	for _, e := range entries {
		e = strings.TrimSpace(e)
		r := authRule{text: e}
		switch {
		case e == RuleCodeowners:
			r.codeowners = true
		case strings.HasPrefix(e, RuleTeamPrefix):
			org, team, ok := strings.Cut(strings.TrimPrefix(e, RuleTeamPrefix), "/")
			if !ok || !nameShaped(org) || !nameShaped(team) {
				errs = append(errs, fmt.Errorf("%w: routing.authorized %q: write team:ORG/SLUG, e.g. team:acme/reviewers", ErrBadRule, e))
				continue
			}
			r.org, r.team = org, team
		case strings.HasPrefix(e, RulePermissionPrefix):
			p := strings.TrimPrefix(e, RulePermissionPrefix)
			if p != "write" && p != "maintain" && p != "admin" {
				errs = append(errs, fmt.Errorf("%w: routing.authorized %q: the permission is write, maintain or admin", ErrBadRule, e))
				continue
			}
			r.permission = p
		default:
			l := strings.TrimPrefix(e, "@")
			if !nameShaped(strings.TrimSuffix(l, "[bot]")) {
				errs = append(errs, fmt.Errorf("%w: routing.authorized %q is not a login, team:ORG/SLUG, permission:write|maintain|admin or codeowners", ErrBadRule, e))
				continue
			}
			r.login = l
		}
		out = append(out, r)
	}
	return out, errors.Join(errs...)
}

func nameShaped(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return true
}

// Deferred reports whether routing.authorized holds a rule only GitHub can
// answer (not a bare login): the Router then admits every named actor and
// leaves the answer to an Authority.
func deferredRules(entries []string) bool {
	rules, _ := parseRules(entries)
	for _, r := range rules {
		if r.login == "" {
			return true
		}
	}
	return false
}

// AuthorityDeps is the outside world of an Authority.
type AuthorityDeps struct {
	// Integrations asks GitHub (github.team-membership,
	// github.collaborator-permission, github.get-file).
	Integrations graph.Integrations
	// Clock times the cache (default graph.SystemClock): share the
	// daemon's.
	Clock graph.Clock
}

// Authority answers whether a login may approve a gate or command a
// session. It is safe for concurrent use; it starts no goroutine.
type Authority struct {
	rules []authRule
	ttl   time.Duration
	integ graph.Integrations
	clock graph.Clock

	mu    sync.Mutex
	cache map[string]cachedAnswer
}

type cachedAnswer struct {
	at  time.Time
	yes bool
	co  *codeowners // a CODEOWNERS answer (nil: no file)
}

// NewAuthority builds an Authority over routing.authorized entries; ttl
// <= 0 is DefaultAuthorityTTL.
func NewAuthority(entries []string, ttl time.Duration, deps AuthorityDeps) (*Authority, error) {
	rules, err := parseRules(entries)
	if err != nil {
		return nil, err
	}
	if ttl <= 0 {
		ttl = DefaultAuthorityTTL
	}
	if deps.Clock == nil {
		deps.Clock = graph.SystemClock{}
	}
	return &Authority{rules: rules, ttl: ttl, integ: deps.Integrations, clock: deps.Clock, cache: map[string]cachedAnswer{}}, nil
}

// Reset replaces the rules and the TTL (a reload of routing.authorized or
// routing.authorizedCacheSeconds) and forgets every cached answer, so a
// rule taken away holds from the next question on. Bad entries leave the
// Authority as it was.
func (a *Authority) Reset(entries []string, ttl time.Duration) error {
	rules, err := parseRules(entries)
	if err != nil {
		return err
	}
	if ttl <= 0 {
		ttl = DefaultAuthorityTTL
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rules, a.ttl = rules, ttl
	a.cache = map[string]cachedAnswer{}
	return nil
}

// current is the rules in force.
func (a *Authority) current() []authRule {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.rules
}

// Subject is a question put to an Authority.
type Subject struct {
	// Login is who acted.
	Login string
	// Item is the work item (or pull request) acted on: its repository is
	// the one asked about.
	Item workitem.Ref
	// Paths are the gated artifacts' paths in the repository; none for a
	// control keyword or session event, when codeowners means the owners
	// of the repository's catch-all rule (*).
	Paths []string
}

// Authorize returns the rule (as written in routing.authorized) that lets
// s.Login act, "" when none does. An error means GitHub could not be
// asked: nothing may move (fail closed) and the caller tries again later.
// Rules are tried in order; a login rule needs no request.
func (a *Authority) Authorize(ctx context.Context, s Subject) (string, error) {
	if a == nil || s.Login == "" {
		return "", nil
	}
	rules := a.current()
	for _, r := range rules {
		if r.login != "" && r.login == s.Login {
			return r.text, nil
		}
	}
	if s.Item.Provider != "github" {
		return "", nil // teams, roles and CODEOWNERS are GitHub's
	}
	var errs []error
	for _, r := range rules {
		var ok bool
		var err error
		switch {
		case r.team != "":
			ok, err = a.member(ctx, s.Item, r.org, r.team, s.Login)
		case r.permission != "":
			ok, err = a.role(ctx, s.Item, s.Login, r.permission)
		case r.codeowners:
			ok, err = a.codeOwner(ctx, s)
		default:
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if ok {
			return r.text, nil
		}
	}
	if len(errs) > 0 {
		return "", fmt.Errorf("asking GitHub whether %s may act on %s: %w", s.Login, s.Item, errors.Join(errs...))
	}
	return "", nil
}

// Named reports whether login is a login rule (no request needed).
func (a *Authority) Named(login string) bool {
	if a == nil || login == "" {
		return false
	}
	rules := a.current()
	return slices.ContainsFunc(rules, func(r authRule) bool { return r.login == login })
}

func (a *Authority) cached(key string) (cachedAnswer, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	c, ok := a.cache[key]
	if !ok || a.clock.Now().Sub(c.at) >= a.ttl {
		return cachedAnswer{}, false
	}
	return c, true
}

func (a *Authority) remember(key string, c cachedAnswer) {
	c.at = a.clock.Now()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.cache) > 4096 {
		for k, v := range a.cache {
			if c.at.Sub(v.at) >= a.ttl {
				delete(a.cache, k)
			}
		}
	}
	a.cache[key] = c
}

func itemRepo(it workitem.Ref) string {
	r := it.Owner + "/" + it.Repo
	if it.Host != "" {
		r = it.Host + "/" + r
	}
	return r
}

func (a *Authority) member(ctx context.Context, it workitem.Ref, org, team, login string) (bool, error) {
	key := strings.ToLower("team\x00" + it.Host + "\x00" + org + "/" + team + "\x00" + login)
	if c, ok := a.cached(key); ok {
		return c.yes, nil
	}
	res, err := a.integ.Call(ctx, ops.GitHubTeamMembership, map[string]any{"org": org, "team": team, "login": login, "repo": itemRepo(it)})
	if err != nil {
		return false, err
	}
	yes := graph.Values(res).String("state") == "active"
	a.remember(key, cachedAnswer{yes: yes})
	return yes, nil
}

func (a *Authority) role(ctx context.Context, it workitem.Ref, login, least string) (bool, error) {
	key := strings.ToLower("perm\x00" + itemRepo(it) + "\x00" + login)
	c, ok := a.cached(key)
	if !ok {
		res, err := a.integ.Call(ctx, ops.GitHubCollaboratorPermission, map[string]any{"repo": itemRepo(it), "login": login})
		if err != nil {
			return false, err
		}
		// The role is cached (as its rank) so every permission rule
		// shares one answer.
		c = cachedAnswer{at: a.clock.Now(), co: &codeowners{rank: roleRank[graph.Values(res).String("permission")]}}
		a.remember(key, c)
	}
	return c.co.rank >= roleRank[least], nil
}

func (a *Authority) codeOwner(ctx context.Context, s Subject) (bool, error) {
	key := strings.ToLower("co\x00" + itemRepo(s.Item))
	c, ok := a.cached(key)
	if !ok {
		co, err := a.readCodeowners(ctx, s.Item)
		if err != nil {
			return false, err
		}
		c = cachedAnswer{co: co}
		a.remember(key, c)
	}
	if c.co == nil {
		return false, nil
	}
	if len(s.Paths) == 0 {
		return a.ownedBy(ctx, s, c.co.catchAll())
	}
	// The approver must own every gated path.
	for _, p := range s.Paths {
		ok, err := a.ownedBy(ctx, s, c.co.owners(p))
		if err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// ownedBy reports whether s.Login is one of owners, or a member of a team
// among them.
func (a *Authority) ownedBy(ctx context.Context, s Subject, owners []string) (bool, error) {
	for _, o := range owners {
		if org, team, isTeam := strings.Cut(o, "/"); isTeam {
			ok, err := a.member(ctx, s.Item, org, team, s.Login)
			if err != nil {
				return false, err
			}
			if ok {
				return true, nil
			}
		} else if strings.EqualFold(o, s.Login) {
			return true, nil
		}
	}
	return false, nil
}

func (a *Authority) readCodeowners(ctx context.Context, it workitem.Ref) (*codeowners, error) {
	for _, p := range codeownersPaths {
		res, err := a.integ.Call(ctx, ops.GitHubGetFile, map[string]any{"repo": itemRepo(it), "path": p})
		if err != nil {
			return nil, err
		}
		v := graph.Values(res)
		if v.Bool("found") {
			return parseCodeowners(v.String("content")), nil
		}
	}
	return nil, nil
}

// --- CODEOWNERS -----------------------------------------------------------

// codeowners is a parsed CODEOWNERS file: rules in file order, the last
// matching one winning (GitHub's rule).
type codeowners struct {
	rules []coRule
	rank  int // reused by the role cache
}

type coRule struct {
	pattern string
	re      *regexp.Regexp
	owners  []string // logins and org/team, without '@'; emails dropped
}

// maxCodeownersRules bounds what a hostile or huge file costs.
const maxCodeownersRules = 5000

func parseCodeowners(text string) *codeowners {
	co := &codeowners{}
	for _, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if i := strings.Index(line, " #"); i >= 0 {
			line = strings.TrimSpace(line[:i])
		}
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.Fields(line)
		re, err := codeownersPattern(f[0])
		if err != nil {
			continue // GitHub ignores a line it cannot read
		}
		r := coRule{pattern: f[0], re: re}
		for _, o := range f[1:] {
			if strings.HasPrefix(o, "@") {
				r.owners = append(r.owners, strings.TrimPrefix(o, "@"))
			}
		}
		co.rules = append(co.rules, r)
		if len(co.rules) >= maxCodeownersRules {
			break
		}
	}
	return co
}

// owners are the owners of path: the last matching rule's (a rule with no
// owners leaves the path unowned).
func (co *codeowners) owners(path string) []string {
	path = strings.TrimPrefix(path, "/")
	for i := len(co.rules) - 1; i >= 0; i-- {
		if co.rules[i].re.MatchString(path) {
			return co.rules[i].owners
		}
	}
	return nil
}

// catchAll are the owners of the last rule matching every path.
func (co *codeowners) catchAll() []string {
	for i := len(co.rules) - 1; i >= 0; i-- {
		switch co.rules[i].pattern {
		case "*", "**", "/**", "/*/**", "/":
			return co.rules[i].owners
		}
	}
	return nil
}

// codeownersPattern turns a gitignore-style CODEOWNERS pattern into a
// regular expression over slash-separated repository paths: a leading or
// inner slash anchors it at the root, else it matches at any depth; a
// trailing slash matches a directory's contents; * and ? stay within a
// path segment, ** crosses them; a pattern naming a directory owns what is
// under it, but one whose last segment has a wildcard does not descend
// (GitHub: docs/* owns docs/a.md, not docs/x/b.md).
func codeownersPattern(p string) (*regexp.Regexp, error) {
	if p == "" || strings.HasPrefix(p, "!") || strings.Contains(p, "[") || strings.HasPrefix(p, "\\#") {
		return nil, errors.New("unsupported pattern")
	}
	dirOnly := strings.HasSuffix(p, "/")
	p = strings.TrimSuffix(p, "/")
	anchored := strings.HasPrefix(p, "/") || strings.Contains(p, "/")
	p = strings.TrimPrefix(p, "/")
	var b strings.Builder
	b.WriteString("^")
	if !anchored {
		b.WriteString("(?:.*/)?")
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		last := i == len(segs)-1
		if s == "**" {
			if last {
				b.WriteString(".*")
			} else {
				b.WriteString("(?:.*/)?")
			}
			continue
		}
		for _, r := range s {
			switch r {
			case '*':
				b.WriteString("[^/]*")
			case '?':
				b.WriteString("[^/]")
			default:
				b.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		if !last {
			b.WriteString("/")
		}
	}
	last := segs[len(segs)-1]
	switch {
	case last == "**":
		b.WriteString("$")
	case dirOnly:
		b.WriteString("/.*$")
	case strings.ContainsAny(last, "*?") && anchored:
		b.WriteString("$")
	default:
		b.WriteString("(?:/.*)?$")
	}
	return regexp.Compile(b.String())
}
