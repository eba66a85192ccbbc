package loop

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLoadCollaborators(t *testing.T) {
	repo := t.TempDir()
	c, err := LoadCollaborators(repo)
	require.NoError(t, err)
	assert.Empty(t, c, "a missing file is an empty list")

	writeRepoFile(t, repo, CollaboratorsFile, `# who is notified
version: 1
collaborators:
  - login: dana
    name: Dana Scully
    roles: [approver, reviewer]
    slack: U0123ABCD
    email: dana@example.com
  - login: "@fox"
    roles: [reviewer]
  - login: walter
`)
	c, err = LoadCollaborators(repo)
	require.NoError(t, err)
	require.Len(t, c, 3)
	assert.Equal(t, Collaborator{Login: "dana", Name: "Dana Scully", Roles: []string{"approver", "reviewer"}, Slack: "U0123ABCD", Email: "dana@example.com"}, c[0])
	assert.Equal(t, "fox", c[1].Login, "a leading @ is dropped")

	logins := func(cs []Collaborator) []string {
		var out []string
		for _, c := range cs {
			out = append(out, c.Login)
		}
		return out
	}
	assert.Equal(t, []string{"dana", "fox"}, logins(c.ByRole("reviewer")), "file order")
	assert.Equal(t, []string{"dana"}, logins(c.ByRole("approver")))
	assert.Empty(t, c.ByRole("security"))
	assert.Empty(t, c.ByRole(""))
}

func TestParseCollaboratorsRefuses(t *testing.T) {
	cases := []struct {
		name, yaml string
		says       string
	}{
		{"unparseable", "collaborators: [\n", "not valid YAML"},
		{"a list at the top", "- login: dana\n", "must be a YAML mapping"},
		{"unknown top-level key", "people: []\n", `unknown top-level key "people"`},
		{"not a list", "collaborators: dana\n", "collaborators: expected a list"},
		{"entry not a mapping", "collaborators: [dana]\n", "collaborators[0]: expected a mapping"},
		{"missing login", "collaborators:\n  - name: Dana\n", `collaborators[0].login: "" is not a GitHub login`},
		{"bad login", "collaborators:\n  - login: 'dana; rm -rf'\n", "is not a GitHub login"},
		{"typo in a key", "collaborators:\n  - login: dana\n    role: [approver]\n", `collaborators[0]: unknown key "role"`},
		{"roles not a list", "collaborators:\n  - login: dana\n    roles: approver\n", "collaborators[0].roles: expected a list"},
		{"role not a string", "collaborators:\n  - login: dana\n    roles: [1]\n", "collaborators[0].roles[0]: expected a role name, got a number"},
		{"empty role", "collaborators:\n  - login: dana\n    roles: ['']\n", "collaborators[0].roles[0]: is empty"},
		{"slack not a string", "collaborators:\n  - login: dana\n    slack: 12\n", "collaborators[0].slack: expected a string, got a number"},
		{"duplicate", "collaborators:\n  - login: dana\n  - login: Dana\n", `collaborators[1].login: "Dana" is already listed at collaborators[0]`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := ParseCollaborators("c.yaml", []byte(tc.yaml))
			require.ErrorIs(t, err, ErrInvalidConfig)
			assert.Contains(t, err.Error(), tc.says)
			assert.Contains(t, err.Error(), "c.yaml")
		})
	}
}

func TestLoadCollaboratorsUnreadable(t *testing.T) {
	repo := t.TempDir()
	require.NoError(t, os.MkdirAll(filepath.Join(repo, CollaboratorsFile), 0o755))
	_, err := LoadCollaborators(repo)
	require.ErrorIs(t, err, ErrInvalidConfig)
	assert.Contains(t, err.Error(), CollaboratorsFile)
}

// FuzzParseCollaborators: no bytes may panic; every error is
// ErrInvalidConfig, and every accepted entry has a valid login.
func FuzzParseCollaborators(f *testing.F) {
	for _, s := range []string{
		"", "collaborators: []\n", "collaborators:\n  - login: dana\n    roles: [approver]\n",
		"collaborators: [{login: a}, {login: b, slack: U1}]\n", "collaborators: [\n", "- a\n", "collaborators: &a [*a]\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c, err := ParseCollaborators("fuzz.yaml", data)
		if err != nil {
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		for _, p := range c {
			if !loginPattern.MatchString(p.Login) {
				t.Fatalf("accepted login %q", p.Login)
			}
		}
	})
}
