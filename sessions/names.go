package sessions

import (
	"crypto/rand"
	"fmt"
	"strings"

	"github.com/theloop-dev/theloop/internal/lazyre"
	"github.com/theloop-dev/theloop/internal/sessionid"
	"github.com/theloop-dev/theloop/workitem"
)

var (
	loopNamePattern = lazyre.New(`^loop-[A-Za-z0-9_-]+$`)
	branchPattern   = lazyre.New(`^[A-Za-z0-9._/-]+$`)
	pathPartPattern = lazyre.New(`^[A-Za-z0-9._][A-Za-z0-9._-]*$`)
)

// SanitizeTmuxName rewrites a session name the way tmux stores it ("." and
// ":" become "_", since tmux reads them as window and pane separators) and,
// stricter than tmux, turns every other character outside [A-Za-z0-9_-]
// into "-", so a stored name can be compared with the one tmux reports and
// is always safe as a -t target. It is idempotent. Apply it both when
// minting a name and when loading one from a record.
func SanitizeTmuxName(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for _, r := range s {
		switch {
		case r == '.' || r == ':':
			b.WriteByte('_')
		case r == '_' || r == '-' || (r >= 'a' && r <= 'z') || (r >= 'A' && r <= 'Z') || (r >= '0' && r <= '9'):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	return b.String()
}

// TmuxName is the tmux session name for a work item: loop-<slug>, with "."
// and ":" rewritten to "_" as tmux itself would.
func TmuxName(item workitem.Ref) string { return SanitizeTmuxName("loop-" + item.Slug()) }

// IsLoopSessionName reports whether name is one theloop may signal, kill or
// paste into: loop-[A-Za-z0-9_-]+.
func IsLoopSessionName(name string) bool { return loopNamePattern.MatchString(name) }

// ValidSessionID reports whether id has the shape of a harness session id
// that may be passed to --resume: [A-Za-z0-9][A-Za-z0-9._-]{0,127}. Such an
// id never starts with "-", so it cannot be read as a flag.
// It is written out by hand: the Stop hook calls it on every stop, and the
// equivalent regular expression takes milliseconds to compile.
func ValidSessionID(id string) bool { return sessionid.Valid(id) }

// NewSessionID returns a random (version 4) UUID in the 8-4-4-4-12 form
// Claude Code accepts for --session-id.
func NewSessionID() (string, error) {
	var u [16]byte
	if _, err := rand.Read(u[:]); err != nil {
		return "", fmt.Errorf("generating a session id: %w", err)
	}
	u[6] = u[6]&0x0f | 0x40 // version 4
	u[8] = u[8]&0x3f | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%x-%x-%x-%x-%x", u[0:4], u[4:6], u[6:8], u[8:10], u[10:16]), nil
}

// ValidateBranch checks a branch name before it reaches git argv. It accepts
// a subset of what `git check-ref-format --branch` accepts: characters
// [A-Za-z0-9._/-] only, no "..", "//", "@{", no component starting with "."
// or ending with ".lock", not starting with "-" or "/", not ending with "/"
// or ".", at most 200 bytes.
func ValidateBranch(b string) error {
	bad := func(why string) error {
		return fmt.Errorf("%w: branch %q %s", ErrInvalidName, b, why)
	}
	switch {
	case b == "":
		return bad("is empty")
	case len(b) > 200:
		return bad("is longer than 200 bytes")
	case !branchPattern.MatchString(b):
		return bad("may only contain A-Z a-z 0-9 . _ / -")
	case strings.HasPrefix(b, "-") || strings.HasPrefix(b, "/"):
		return bad(`must not start with "-" or "/"`)
	case strings.HasSuffix(b, "/") || strings.HasSuffix(b, "."):
		return bad(`must not end with "/" or "."`)
	case strings.Contains(b, "..") || strings.Contains(b, "//"):
		return bad(`must not contain ".." or "//"`)
	}
	for _, c := range strings.Split(b, "/") {
		if strings.HasPrefix(c, ".") || strings.HasSuffix(c, ".lock") {
			return bad(`has a component starting with "." or ending with ".lock"`)
		}
	}
	return nil
}

// validPathPart reports whether s may be used as one directory name built
// from outside input (host, owner, repo, slug): [A-Za-z0-9._-], not
// starting with "-", never "", "." or "..", at most 255 bytes — the rules
// workitem applies to owner and repo, with the file system's length limit
// (a slug joins several parts).
func validPathPart(s string) bool {
	return len(s) <= 255 && s != "." && s != ".." && pathPartPattern.MatchString(s)
}
