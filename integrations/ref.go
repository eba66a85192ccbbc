package integrations

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/theloop-dev/theloop/internal/lazyre"
)

// Ref is a parsed work-item reference (daemon-spec §0.1):
// <provider>:[<host>/]<owner>/<repo>#<number>.
type Ref struct {
	Provider string
	// Host is "" for the provider's default host (github.com is never
	// written in a ref).
	Host   string
	Owner  string
	Repo   string
	Number int
}

var (
	refRE     = lazyre.New(`^([a-z][a-z0-9-]*):([^#]+)#(\d+)$`)
	nameRE    = lazyre.New(`^[A-Za-z0-9._-]+$`)
	dottedRE  = lazyre.New(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+(:\d{1,5})?$`)
	namePort  = lazyre.New(`^[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?:\d{1,5}$`)
	maxNumber = 1 << 31
)

// ParseRef parses a work-item ref. Owner and repository must be plain
// GitHub names ([A-Za-z0-9._-], not "." or ".."), because they become URL
// path segments and command arguments; the host must look like a host.
func ParseRef(s string) (Ref, error) {
	m := refRE.FindStringSubmatch(strings.TrimSpace(s))
	if m == nil {
		return Ref{}, fmt.Errorf("%q is not a work-item ref like github:owner/repo#12: %w", clip(s, 80), ErrInvalidRef)
	}
	n, err := strconv.Atoi(m[3])
	if err != nil || n <= 0 || n >= maxNumber {
		return Ref{}, fmt.Errorf("%q: the number must be a positive integer: %w", clip(s, 80), ErrInvalidRef)
	}
	r := Ref{Provider: m[1], Number: n}
	parts := strings.Split(m[2], "/")
	switch len(parts) {
	case 2:
		r.Owner, r.Repo = parts[0], parts[1]
	case 3:
		r.Host, r.Owner, r.Repo = strings.ToLower(parts[0]), parts[1], parts[2]
		if !validHost(r.Host) {
			return Ref{}, fmt.Errorf("%q: %q is not a host: %w", clip(s, 80), clip(parts[0], 40), ErrInvalidRef)
		}
	default:
		return Ref{}, fmt.Errorf("%q: the path must be owner/repo or host/owner/repo: %w", clip(s, 80), ErrInvalidRef)
	}
	if !validName(r.Owner) || !validName(r.Repo) {
		return Ref{}, fmt.Errorf("%q: owner and repository must match [A-Za-z0-9._-]+: %w", clip(s, 80), ErrInvalidRef)
	}
	if r.Provider == "github" && r.Host == "github.com" {
		r.Host = ""
	}
	return r, nil
}

// String renders the ref; the default host is never written.
func (r Ref) String() string {
	if r.Host == "" {
		return fmt.Sprintf("%s:%s/%s#%d", r.Provider, r.Owner, r.Repo, r.Number)
	}
	return fmt.Sprintf("%s:%s/%s/%s#%d", r.Provider, r.Host, r.Owner, r.Repo, r.Number)
}

// Repo names an owner/repo pair, optionally on a host: "owner/repo" or
// "host/owner/repo" (the list-items-by-label argument).
func parseRepo(s string) (host, owner, repo string, err error) {
	parts := strings.Split(strings.TrimSpace(s), "/")
	switch len(parts) {
	case 2:
		owner, repo = parts[0], parts[1]
	case 3:
		host, owner, repo = strings.ToLower(parts[0]), parts[1], parts[2]
		if !validHost(host) {
			return "", "", "", fmt.Errorf("%q: %q is not a host: %w", clip(s, 80), clip(parts[0], 40), ErrInvalidArgument)
		}
		if host == "github.com" {
			host = ""
		}
	default:
		return "", "", "", fmt.Errorf("repo %q must be owner/repo or host/owner/repo: %w", clip(s, 80), ErrInvalidArgument)
	}
	if !validName(owner) || !validName(repo) {
		return "", "", "", fmt.Errorf("repo %q: owner and repository must match [A-Za-z0-9._-]+: %w", clip(s, 80), ErrInvalidArgument)
	}
	return host, owner, repo, nil
}

func validName(s string) bool {
	return nameRE.MatchString(s) && s != "." && s != ".."
}

func validHost(h string) bool {
	return dottedRE.MatchString(h) || namePort.MatchString(h)
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
