package workitem

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/internal/lazyre"
)

// A work item tracked in Jira is named by its issue key, PROJ-123, and its
// ref is jira:PROJ-123 — the key, not a repository path: a Jira issue
// belongs to a project, not to a repository. The key is what Jira's REST
// API takes in its paths, so the rules are Jira's own: a project key of an
// upper-case letter then upper-case letters, digits or _, a dash, and an
// issue number 1 … MaxNumber without leading zeros.

// JiraProvider is the provider part of a Jira work item's ref.
const JiraProvider = "jira"

var (
	jiraKeyPattern     = lazyre.New(`^([A-Z][A-Z0-9_]{0,99})-([1-9][0-9]{0,9})$`)
	jiraProjectPattern = lazyre.New(`^[A-Z][A-Z0-9_]{0,99}$`)
)

// ParseJiraKey parses a Jira issue key, bare (PROJ-123) or as a ref
// (jira:PROJ-123), and returns the bare key. Errors wrap ErrInvalid.
func ParseJiraKey(s string) (string, error) {
	k := strings.TrimSpace(s)
	if len(k) > MaxLen {
		return "", fmt.Errorf("%w: a Jira issue key of %d bytes (at most %d)", ErrInvalid, len(k), MaxLen)
	}
	k = strings.TrimPrefix(k, JiraProvider+":")
	m := jiraKeyPattern.FindStringSubmatch(k)
	if m == nil || !validNumber(m[2]) {
		return "", fmt.Errorf("%w: %q is not a Jira issue key like PROJ-123", ErrInvalid, clip(k, 40))
	}
	return k, nil
}

// JiraRef returns the ref of the Jira issue key (jira:PROJ-123), or "" when
// key does not parse.
func JiraRef(key string) string {
	k, err := ParseJiraKey(key)
	if err != nil {
		return ""
	}
	return JiraProvider + ":" + k
}

// IsJiraRef reports whether ref names a Jira issue (jira:PROJ-123).
func IsJiraRef(ref string) bool {
	if !strings.HasPrefix(ref, JiraProvider+":") {
		return false
	}
	_, err := ParseJiraKey(ref)
	return err == nil
}

// ValidJiraProject reports whether p can be a Jira project key.
func ValidJiraProject(p string) bool { return jiraProjectPattern.MatchString(p) }

func validNumber(s string) bool {
	n := 0
	for _, r := range s {
		n = n*10 + int(r-'0')
		if n > MaxNumber {
			return false
		}
	}
	return n > 0
}

// In loopd a Jira work item needs a repository — its session works in a
// checkout, its artifacts live there — and Jira says nothing of one. The
// mapping is the operator's (webhooks.jiraWebhook.projects): each served
// Jira project names one GitHub repository, and one repository serves at
// most one project, so the daemon's ref of the item,
// jira:owner/repo#123, names the issue PROJ-123 back without ambiguity.

// JiraProjects maps served Jira projects to repositories and back. The
// zero value serves nothing. It is immutable once built.
type JiraProjects struct {
	repoOf    map[string]Ref // project → Ref{Provider: jira, Host, Owner, Repo} (no number)
	projectOf map[string]string
}

// ErrJiraProjects: a project → repository mapping loopd cannot serve.
var ErrJiraProjects = errors.New("invalid Jira project mapping")

// NewJiraProjects checks a project → repository mapping ("PROJ" →
// "owner/repo" or "host/owner/repo"). Errors wrap ErrJiraProjects and name
// the entry.
func NewJiraProjects(m map[string]string) (*JiraProjects, error) {
	p := &JiraProjects{repoOf: map[string]Ref{}, projectOf: map[string]string{}}
	for project, repo := range m {
		if !ValidJiraProject(project) {
			return nil, fmt.Errorf("%w: Jira project %q is not a project key (upper-case letters, digits and _, starting with a letter, e.g. PROJ)", ErrJiraProjects, clip(project, 40))
		}
		host, owner, name, err := ParseRepo(repo)
		if err != nil {
			return nil, fmt.Errorf("%w: Jira project %s: repository %q: want owner/repo", ErrJiraProjects, project, clip(repo, 80))
		}
		r := Ref{Provider: JiraProvider, Host: host, Owner: owner, Repo: name}
		k := strings.ToLower(r.path())
		if other, dup := p.projectOf[k]; dup {
			return nil, fmt.Errorf("%w: Jira projects %s and %s both name repository %s; a repository serves one Jira project (its work items' refs would collide)", ErrJiraProjects, min(other, project), max(other, project), repo)
		}
		p.repoOf[project], p.projectOf[k] = r, project
	}
	return p, nil
}

// Projects lists the served project keys, sorted.
func (p *JiraProjects) Projects() []string {
	if p == nil {
		return nil
	}
	out := make([]string, 0, len(p.repoOf))
	for k := range p.repoOf {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// Ref is the daemon's ref of issue key (PROJ-123 or jira:PROJ-123):
// jira:owner/repo#123 for the project's repository. Errors wrap ErrInvalid
// (a key that does not parse, a project not served).
func (p *JiraProjects) Ref(key string) (Ref, error) {
	k, err := ParseJiraKey(key)
	if err != nil {
		return Ref{}, err
	}
	project, num, _ := strings.Cut(k, "-")
	r, ok := Ref{}, false
	if p != nil {
		r, ok = p.repoOf[project]
	}
	if !ok {
		return Ref{}, fmt.Errorf("%w: Jira project %s is not served (webhooks.jiraWebhook.projects)", ErrInvalid, project)
	}
	r.Number, _ = parseNumber(num)
	return r, nil
}

// Key is the Jira issue key (PROJ-123) of a daemon ref from Ref; false for
// any other ref.
func (p *JiraProjects) Key(r Ref) (string, bool) {
	if p == nil || r.Provider != JiraProvider || r.Number <= 0 {
		return "", false
	}
	project, ok := p.projectOf[strings.ToLower(r.path())]
	if !ok {
		return "", false
	}
	return project + "-" + strconv.Itoa(r.Number), true
}

// Repository is the GitHub repository's ref a Jira item works in (provider
// github, same host, owner, repo and number): what a clone URL or a
// GitHub call about the repository is made from.
func (r Ref) Repository() Ref {
	out := r
	out.Provider = "github"
	return out
}
