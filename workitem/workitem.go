// Package workitem is theloop's one parser of work-item refs,
// <provider>:[<host>/]<owner>/<repo>#<number> (docs/daemon.md §0.1), and the
// names derived from one (slug, branch, spec directory, URL). Every package
// that reads a ref — webhooks and the poller, the daemon, sessions, the
// integrations, loopctl — parses it here, so a ref one of them accepts is a
// ref all of them accept.
//
// The rules accept every shape a real ref takes (GitHub's .github
// repositories, enterprise hosts with a port) and refuse what could do harm
// where a ref's parts end up — file names, tmux names, URLs and argv:
//
//   - provider: [a-z][a-z0-9-]*, at most MaxPart characters;
//   - host (optional): dotted DNS labels with an optional :port, or
//     name:port; lower-cased; github.com is dropped for github refs;
//   - owner and repo: [A-Za-z0-9._-], not starting with "-" (it would read as
//     an option), not "." or "..", at most MaxPart characters;
//   - number: 1 … MaxNumber, leading zeros dropped;
//   - the whole ref at most MaxLen bytes, surrounding space trimmed.
//
// The package does no I/O and imports nothing of theloop's but a regexp
// helper, so the kernel's neighbours can all depend on it.
package workitem

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/internal/lazyre"
)

// ErrInvalid: a work-item ref (or an owner/repo pair) does not parse. The
// error wrapping it says which part is wrong and what shape is expected.
var ErrInvalid = errors.New("invalid work-item ref")

const (
	// DefaultGitHubHost is the host a github ref means when it names none.
	// It is never written into a ref (github:octo/repo#15, not
	// github:github.com/octo/repo#15).
	DefaultGitHubHost = "github.com"
	// MaxNumber is the largest issue or pull-request number accepted
	// (GitHub's numbers are 32-bit).
	MaxNumber = 1<<31 - 1
	// MaxPart bounds the provider, host, owner and repo, so a hostile ref
	// cannot produce a file name longer than the filesystem allows.
	MaxPart = 100
	// MaxLen bounds a whole ref before it is parsed.
	MaxLen = 4*MaxPart + 16
)

// Ref is a parsed work-item ref. The zero value is not a valid ref (IsZero);
// build one with Parse so that every field has passed the checks that let it
// reach file names, tmux names and git argv, or fill the fields from values
// that already have (a provider's API answer checked with ValidName).
//
// Ref has no JSON tags and no MarshalText on purpose: its JSON shape
// ({"Provider":…,"Host":…,"Owner":…,"Repo":…,"Number":…}) is part of the
// daemon queue's wire format.
type Ref struct {
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
	refPattern = lazyre.New(`^([a-z][a-z0-9-]*):([^#]+)#([0-9]+)$`)
	slugUnsafe = lazyre.New(`[^A-Za-z0-9._-]+`)
)

// Parse parses a work-item ref. Errors wrap ErrInvalid and name the part
// that is wrong (input is clipped in messages).
func Parse(s string) (Ref, error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxLen {
		return Ref{}, fmt.Errorf("%w %q: longer than %d bytes", ErrInvalid, clip(s, 80), MaxLen)
	}
	m := refPattern.FindStringSubmatch(s)
	if m == nil {
		return Ref{}, fmt.Errorf("%w %q: want <provider>:[<host>/]<owner>/<repo>#<number>, e.g. github:octo/repo#15", ErrInvalid, clip(s, 80))
	}
	provider, path, num := m[1], m[2], m[3]
	if len(provider) > MaxPart {
		return Ref{}, fmt.Errorf("%w %q: provider is longer than %d characters", ErrInvalid, clip(s, 80), MaxPart)
	}
	n, err := parseNumber(num)
	if err != nil {
		return Ref{}, fmt.Errorf("%w %q: %v", ErrInvalid, clip(s, 80), err)
	}
	r := Ref{Provider: provider, Number: n}
	r.Host, r.Owner, r.Repo, err = splitPath(path)
	if err != nil {
		return Ref{}, fmt.Errorf("%w %q: %v", ErrInvalid, clip(s, 80), err)
	}
	if r.Provider == "github" && r.Host == DefaultGitHubHost {
		r.Host = ""
	}
	return r, nil
}

// Canonical checks a Ref built from fields — decoded from the daemon
// queue's JSON, read from a session record — by Parse's rules, and returns
// it as Parse would have: the host lower-cased, GitHub's default host
// dropped. It is what Parse(r.String()) answers for a valid ref, without
// the string: a field that only parses once joined to its neighbours (an
// owner "host.example/octo") is refused, not re-read as another ref.
// Errors wrap ErrInvalid and name the part that is wrong.
func (r Ref) Canonical() (Ref, error) {
	if len(r.Provider) > MaxPart || !validProvider(r.Provider) {
		return Ref{}, fmt.Errorf("%w: provider %q must match [a-z][a-z0-9-]* (at most %d characters)", ErrInvalid, clip(r.Provider, 40), MaxPart)
	}
	if r.Number <= 0 || r.Number > MaxNumber {
		return Ref{}, fmt.Errorf("%w: number %d must be 1 … %d", ErrInvalid, r.Number, MaxNumber)
	}
	if r.Host != "" {
		r.Host = strings.ToLower(r.Host)
		if !ValidHost(r.Host) {
			return Ref{}, fmt.Errorf("%w: host %q must be dotted DNS labels with an optional :port, or name:port", ErrInvalid, clip(r.Host, 40))
		}
	}
	for _, p := range []struct{ what, v string }{{"owner", r.Owner}, {"repo", r.Repo}} {
		if !ValidName(p.v) {
			return Ref{}, fmt.Errorf("%w: %s %q must match [A-Za-z0-9._-]+, not start with \"-\", not be \".\" or \"..\" (at most %d characters)", ErrInvalid, p.what, clip(p.v, 40), MaxPart)
		}
	}
	if r.Provider == "github" && r.Host == DefaultGitHubHost {
		r.Host = ""
	}
	return r, nil
}

// validProvider: [a-z][a-z0-9-]*, refPattern's provider group.
func validProvider(p string) bool {
	if p == "" || p[0] < 'a' || p[0] > 'z' {
		return false
	}
	for i := 1; i < len(p); i++ {
		if c := p[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// ParseRepo parses "owner/repo" or "host/owner/repo" with Parse's rules. The
// host is lower-cased; github.com, GitHub's default, comes back as "".
func ParseRepo(s string) (host, owner, repo string, err error) {
	s = strings.TrimSpace(s)
	if len(s) > MaxLen {
		return "", "", "", fmt.Errorf("%w: repository %q is longer than %d bytes", ErrInvalid, clip(s, 80), MaxLen)
	}
	host, owner, repo, err = splitPath(s)
	if err != nil {
		return "", "", "", fmt.Errorf("%w: repository %q: %v", ErrInvalid, clip(s, 80), err)
	}
	if host == DefaultGitHubHost {
		host = ""
	}
	return host, owner, repo, nil
}

// splitPath checks [host/]owner/repo.
func splitPath(path string) (host, owner, repo string, err error) {
	parts := strings.Split(path, "/")
	switch len(parts) {
	case 2:
		owner, repo = parts[0], parts[1]
	case 3:
		host, owner, repo = strings.ToLower(parts[0]), parts[1], parts[2]
		if !ValidHost(host) {
			return "", "", "", fmt.Errorf("host %q must be dotted DNS labels with an optional :port, or name:port", clip(parts[0], 40))
		}
	default:
		return "", "", "", errors.New("the path must be owner/repo or host/owner/repo")
	}
	for _, p := range []struct{ what, v string }{{"owner", owner}, {"repo", repo}} {
		if !ValidName(p.v) {
			return "", "", "", fmt.Errorf("%s %q must match [A-Za-z0-9._-]+, not start with \"-\", not be \".\" or \"..\" (at most %d characters)", p.what, clip(p.v, 40), MaxPart)
		}
	}
	return host, owner, repo, nil
}

func parseNumber(num string) (int, error) {
	trimmed := strings.TrimLeft(num, "0")
	if trimmed == "" {
		return 0, errors.New("the number must be positive")
	}
	if len(trimmed) > 10 {
		return 0, fmt.Errorf("number %s is larger than %d", clip(num, 20), MaxNumber)
	}
	n, err := strconv.Atoi(trimmed) // at most 10 digits, all [0-9]: no overflow on 64-bit
	if err != nil || n > MaxNumber {
		return 0, fmt.Errorf("number %s is larger than %d", clip(num, 20), MaxNumber)
	}
	return n, nil
}

// ValidName reports whether s may be an owner or repository name in a ref:
// [A-Za-z0-9._-]+, not starting with "-", not "." or "..", at most MaxPart
// characters. Use it for names that arrive from elsewhere (a provider's API
// answer, a closing keyword) before they go into a Ref.
//
// It is a loop over bytes rather than a regexp: the webhook router checks
// every name in a payload with it.
func ValidName(s string) bool {
	if s == "" || len(s) > MaxPart || s == "." || s == ".." || s[0] == '-' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !alnum(c) && c != '.' && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// ValidHost reports whether h is a host a ref may name: "example.com",
// "example.com:8443" or "name:port" (a bare single label is not a host), DNS
// labels of at most 63 characters, a port 1–65535 without leading zeros, at
// most MaxPart characters in all.
func ValidHost(h string) bool {
	if h == "" || len(h) > MaxPart {
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
		if !validLabel(l) {
			return false
		}
	}
	return true
}

// validLabel: a DNS label, [A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?, at most 63
// characters.
func validLabel(l string) bool {
	if l == "" || len(l) > 63 || !alnum(l[0]) || !alnum(l[len(l)-1]) {
		return false
	}
	for i := 0; i < len(l); i++ {
		if !alnum(l[i]) && l[i] != '-' {
			return false
		}
	}
	return true
}

func alnum(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
}

// String renders the canonical ref (default host omitted).
func (r Ref) String() string {
	return r.Provider + ":" + r.path() + "#" + strconv.Itoa(r.Number)
}

func (r Ref) path() string {
	if r.Host == "" {
		return r.Owner + "/" + r.Repo
	}
	return r.Host + "/" + r.Owner + "/" + r.Repo
}

// IsZero reports whether r is the zero value (no work item).
func (r Ref) IsZero() bool { return r == Ref{} }

// Slug is <provider>-<path with "/" → "-">-<number> with every run of
// characters outside [A-Za-z0-9._-] replaced by "-". It names the session
// registry record, the worktree directory and (sessions.TmuxName) the tmux
// session.
//
// Slugs are lossy — github:a-b/c#1 and github:a/b-c#1 share one — so every
// user of a slug checks the stored ref before trusting it.
func (r Ref) Slug() string {
	raw := r.Provider + "-" + strings.ReplaceAll(r.path(), "/", "-") + "-" + strconv.Itoa(r.Number)
	if slugSafe(raw) {
		// Nearly every ref: the regular expression would change nothing
		// (loopd asks for a slug on every event it triages).
		return raw
	}
	return slugUnsafe.ReplaceAllString(raw, "-")
}

// slugSafe reports whether s has only the bytes slugUnsafe keeps.
func slugSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// SpecID is the artifact directory name under the spec dir (issue-<n>) for
// github refs, "" for providers without one.
func (r Ref) SpecID() string {
	if r.Provider != "github" {
		return ""
	}
	return "issue-" + strconv.Itoa(r.Number)
}

// Branch is the branch a work item's worktree is on: issue-<n>.
func (r Ref) Branch() string { return "issue-" + strconv.Itoa(r.Number) }

// HostOrDefault is the repository host, with the provider default filled in
// (github.com for github, and for a Jira item, whose repository is a GitHub
// one; "" for a provider without a known default).
func (r Ref) HostOrDefault() string {
	if r.Host == "" && (r.Provider == "github" || r.Provider == JiraProvider) {
		return DefaultGitHubHost
	}
	return r.Host
}

// URL is the browser URL of a github work item, "" for other providers.
func (r Ref) URL() string {
	if r.Provider != "github" {
		return ""
	}
	return fmt.Sprintf("https://%s/%s/%s/issues/%d", r.HostOrDefault(), r.Owner, r.Repo, r.Number)
}

// WorkItemEnv is the value of THE_LOOP_WORK_ITEM in a spawned session: the
// spec id where there is one (what loop-gate passes to `loopctl check`),
// otherwise the full ref.
func (r Ref) WorkItemEnv() string {
	if id := r.SpecID(); id != "" {
		return id
	}
	return r.String()
}

// clip shortens s for an error message, on a rune boundary.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}

var _ fmt.Stringer = Ref{}
