package sessions

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/theloop-dev/theloop/internal/lazyre"
)

// DefaultGitHubHost is the host a github ref means when it names none. It is
// never written into a ref (github:octo/repo#15, not
// github:github.com/octo/repo#15).
const DefaultGitHubHost = "github.com"

// WorkItem is a parsed work-item reference,
// <provider>:[<host>/]<owner>/<repo>#<number> (daemon spec §0.1).
//
// The zero value is not a valid work item; build one with ParseWorkItem so
// every field has passed the checks that let it reach file names, tmux names
// and git argv.
type WorkItem struct {
	// Provider is the ticketing provider, e.g. "github".
	Provider string
	// Host is the lower-cased host with optional :port, "" for the
	// provider's default host.
	Host string
	// Owner and Repo name the repository.
	Owner, Repo string
	// Number is the issue or pull-request number (> 0).
	Number int
}

var (
	refPattern       = lazyre.New(`^([a-z][a-z0-9-]*):([^#]+)#([0-9]+)$`)
	repoPartPattern  = lazyre.New(`^[A-Za-z0-9][A-Za-z0-9._-]*$`)
	hostLabelPattern = lazyre.New(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?$`)
	slugUnsafe       = lazyre.New(`[^A-Za-z0-9._-]+`)
)

// maxRefPart bounds owner, repo and host so a hostile ref cannot produce a
// file name longer than the filesystem allows.
const maxRefPart = 100

// ParseWorkItem parses a work-item reference. It is strict where the
// reference implementation was lenient: owner and repo must match
// [A-Za-z0-9][A-Za-z0-9._-]*, because they become directory names and git
// arguments. The error says which part is wrong and what shape is expected.
func ParseWorkItem(s string) (WorkItem, error) {
	m := refPattern.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return WorkItem{}, fmt.Errorf("%w %q: want <provider>:[<host>/]<owner>/<repo>#<number>, e.g. github:octo/repo#15", ErrInvalidWorkItem, s)
	}
	provider, path, num := m[1], m[2], m[3]
	if len(num) > 9 {
		return WorkItem{}, fmt.Errorf("%w %q: number %s is too large", ErrInvalidWorkItem, s, num)
	}
	n, _ := strconv.Atoi(num) // at most 9 digits, all [0-9]
	if n <= 0 {
		return WorkItem{}, fmt.Errorf("%w %q: number must be positive", ErrInvalidWorkItem, s)
	}
	w := WorkItem{Provider: provider, Number: n}
	parts := strings.Split(path, "/")
	switch len(parts) {
	case 2:
		w.Owner, w.Repo = parts[0], parts[1]
	case 3:
		w.Host, w.Owner, w.Repo = strings.ToLower(parts[0]), parts[1], parts[2]
		if !validHost(w.Host) {
			return WorkItem{}, fmt.Errorf("%w %q: host %q must be dotted DNS labels with an optional :port, or name:port", ErrInvalidWorkItem, s, parts[0])
		}
	default:
		return WorkItem{}, fmt.Errorf("%w %q: path must be owner/repo or host/owner/repo", ErrInvalidWorkItem, s)
	}
	for _, p := range []struct{ what, v string }{{"owner", w.Owner}, {"repo", w.Repo}} {
		if len(p.v) > maxRefPart || !repoPartPattern.MatchString(p.v) {
			return WorkItem{}, fmt.Errorf("%w %q: %s %q must match [A-Za-z0-9][A-Za-z0-9._-]* (at most %d characters)", ErrInvalidWorkItem, s, p.what, p.v, maxRefPart)
		}
	}
	if w.Provider == "github" && w.Host == DefaultGitHubHost {
		w.Host = ""
	}
	return w, nil
}

// validHost accepts "example.com", "example.com:8443" and "name:port", the
// shapes §0.1 allows; a bare single label is not a host.
func validHost(h string) bool {
	if h == "" || len(h) > maxRefPart {
		return false
	}
	name, port, hasPort := strings.Cut(h, ":")
	if hasPort {
		p, err := strconv.Atoi(port)
		if err != nil || p < 1 || p > 65535 || strconv.Itoa(p) != port {
			return false
		}
	}
	labels := strings.Split(name, ".")
	if len(labels) < 2 && !hasPort {
		return false
	}
	for _, l := range labels {
		if len(l) > 63 || !hostLabelPattern.MatchString(l) {
			return false
		}
	}
	return true
}

// String renders the canonical reference (default host omitted).
func (w WorkItem) String() string {
	return w.Provider + ":" + w.path() + "#" + strconv.Itoa(w.Number)
}

func (w WorkItem) path() string {
	if w.Host == "" {
		return w.Owner + "/" + w.Repo
	}
	return w.Host + "/" + w.Owner + "/" + w.Repo
}

// IsZero reports whether w is the zero value (no work item).
func (w WorkItem) IsZero() bool { return w == WorkItem{} }

// Slug is <provider>-<path with "/" → "-">-<number> with every run of
// characters outside [A-Za-z0-9._-] replaced by "-". It names the registry
// record, the worktree directory and (via TmuxName) the tmux session.
//
// Slugs are lossy — github:a-b/c#1 and github:a/b-c#1 share one — so every
// user of a slug checks the stored ref before trusting it (ErrSlugCollision).
func (w WorkItem) Slug() string {
	raw := w.Provider + "-" + strings.ReplaceAll(w.path(), "/", "-") + "-" + strconv.Itoa(w.Number)
	return slugUnsafe.ReplaceAllString(raw, "-")
}

// TmuxName is the tmux session name for the work item: loop-<slug>, with
// "." and ":" rewritten to "_" as tmux itself would.
func (w WorkItem) TmuxName() string { return SanitizeTmuxName("loop-" + w.Slug()) }

// SpecID is the artifact directory name under the spec dir (issue-<n>) for
// github refs, "" for providers without one.
func (w WorkItem) SpecID() string {
	if w.Provider != "github" {
		return ""
	}
	return "issue-" + strconv.Itoa(w.Number)
}

// Branch is the branch a work item's worktree is on: issue-<n>.
func (w WorkItem) Branch() string { return "issue-" + strconv.Itoa(w.Number) }

// HostOrDefault is the repository host, with the provider default filled in
// (github.com for github; "" for a provider without a known default).
func (w WorkItem) HostOrDefault() string {
	if w.Host == "" && w.Provider == "github" {
		return DefaultGitHubHost
	}
	return w.Host
}

// URL is the browser URL of a github work item, "" for other providers.
func (w WorkItem) URL() string {
	if w.Provider != "github" {
		return ""
	}
	return fmt.Sprintf("https://%s/%s/%s/issues/%d", w.HostOrDefault(), w.Owner, w.Repo, w.Number)
}

// WorkItemEnv is the value of THE_LOOP_WORK_ITEM in a spawned session: the
// spec id where there is one (what loop-gate passes to `loopctl check`),
// otherwise the full reference.
func (w WorkItem) WorkItemEnv() string {
	if id := w.SpecID(); id != "" {
		return id
	}
	return w.String()
}
