package loop

import (
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/internal/lazyre"
)

// Collaborator is one person in a repository's .the-loop/collaborators.yaml:
// the only place notification recipients come from (notifications.events →
// roles → collaborators).
//
// The file format is theloop's own (the-loop v11.2 defines none):
//
//	collaborators:
//	  - login: dana          # GitHub login, required ("@dana" accepted)
//	    name: Dana Scully    # display name, optional
//	    roles: [approver]    # roles named by notifications.events
//	    slack: U0123ABCD     # Slack member id, optional
//	    email: dana@example.com
type Collaborator struct {
	Login string
	Name  string
	Roles []string
	Slack string
	Email string
}

// HasRole reports whether c carries role (exact match).
func (c Collaborator) HasRole(role string) bool {
	for _, r := range c.Roles {
		if r == role {
			return true
		}
	}
	return false
}

// Collaborators is the list read from collaborators.yaml, in file order.
type Collaborators []Collaborator

// ByRole returns the collaborators carrying role, in file order.
func (c Collaborators) ByRole(role string) []Collaborator {
	var out []Collaborator
	for _, p := range c {
		if p.HasRole(role) {
			out = append(out, p)
		}
	}
	return out
}

// loginPattern is a GitHub login: alphanumerics and single hyphens, at most
// 39 characters. Checked loosely (consecutive hyphens allowed) — the point
// is that a login never carries spaces, markup or mentions of others.
var loginPattern = lazyre.New(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)

// collaboratorKeys are the keys an entry may carry; anything else is a
// typo that would silently drop a recipient, so it is an error.
var collaboratorKeys = map[string]bool{"login": true, "name": true, "roles": true, "slack": true, "email": true}

// LoadCollaborators reads <repoRoot>/.the-loop/collaborators.yaml. A
// missing file is an empty list. A file that is unreadable, does not parse
// or breaks the format is an error wrapping ErrInvalidConfig that names the
// file and the entry: recipients are never guessed.
func LoadCollaborators(repoRoot string) (Collaborators, error) {
	data, exists, err := readConfigFile(filepath.Join(repoRoot, filepath.FromSlash(CollaboratorsFile)))
	if !exists {
		return Collaborators{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("%w: reading %s: %v", ErrInvalidConfig, CollaboratorsFile, err)
	}
	return ParseCollaborators(CollaboratorsFile, data)
}

// ParseCollaborators decodes a collaborators file's bytes; name is used in
// messages. See LoadCollaborators. It never panics.
func ParseCollaborators(name string, data []byte) (Collaborators, error) {
	raw, err := decodeYAMLMapWithin(name, data, maxRepoConfigBytes)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrInvalidConfig, err)
	}
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, name, fmt.Sprintf(format, args...))
	}
	for k := range raw {
		if k != "collaborators" && k != "version" {
			return nil, bad("unknown top-level key %q; the file holds `collaborators:` (a list of {login, name, roles, slack, email})", k)
		}
	}
	return collaboratorList(name, raw["collaborators"])
}

// collaboratorList reads a collaborators list (the file's, or the
// operator's cli-config.yaml collaborators).
func collaboratorList(name string, v any) (Collaborators, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s: %s", ErrInvalidConfig, name, fmt.Sprintf(format, args...))
	}
	var err error
	if v == nil {
		return Collaborators{}, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, bad("collaborators: expected a list of {login, name, roles, slack, email}, got %s", typeName(v))
	}
	out := make(Collaborators, 0, len(list))
	seen := map[string]int{}
	for i, e := range list {
		where := fmt.Sprintf("collaborators[%d]", i)
		m, ok := e.(map[string]any)
		if !ok {
			return nil, bad("%s: expected a mapping with login, name, roles, slack, email, got %s", where, typeName(e))
		}
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !collaboratorKeys[k] {
				return nil, bad("%s: unknown key %q; an entry has login, name, roles, slack, email", where, k)
			}
		}
		str := func(key string) (string, error) {
			switch s := m[key].(type) {
			case nil:
				return "", nil
			case string:
				return strings.TrimSpace(s), nil
			default:
				return "", bad("%s.%s: expected a string, got %s", where, key, typeName(s))
			}
		}
		var c Collaborator
		if c.Login, err = str("login"); err != nil {
			return nil, err
		}
		c.Login = strings.TrimPrefix(c.Login, "@")
		if !loginPattern.MatchString(c.Login) {
			return nil, bad("%s.login: %q is not a GitHub login; every entry needs one, such as login: dana", where, c.Login)
		}
		if j, dup := seen[strings.ToLower(c.Login)]; dup {
			return nil, bad("%s.login: %q is already listed at collaborators[%d]; merge the two entries", where, c.Login, j)
		}
		seen[strings.ToLower(c.Login)] = i
		if c.Name, err = str("name"); err != nil {
			return nil, err
		}
		if c.Slack, err = str("slack"); err != nil {
			return nil, err
		}
		if c.Email, err = str("email"); err != nil {
			return nil, err
		}
		switch roles := m["roles"].(type) {
		case nil:
		case []any:
			for j, r := range roles {
				s, ok := r.(string)
				if !ok {
					return nil, bad("%s.roles[%d]: expected a role name, got %s", where, j, typeName(r))
				}
				if strings.TrimSpace(s) == "" {
					return nil, bad("%s.roles[%d]: is empty; name a role such as approver", where, j)
				}
				c.Roles = append(c.Roles, strings.TrimSpace(s))
			}
		default:
			return nil, bad("%s.roles: expected a list of role names such as [approver], got %s", where, typeName(roles))
		}
		out = append(out, c)
	}
	return out, nil
}
