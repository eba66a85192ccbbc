package workitem

import (
	"fmt"
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
