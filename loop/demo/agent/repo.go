package agent

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/theloop-dev/theloop/run"
)

// HarnessConfig is the demo repository's .the-loop/harness-config.yaml:
// tickets on GitHub owner/repo, specs under docs/specs, loop: labels.
func HarnessConfig(owner, repo string) string {
	return fmt.Sprintf(`# .the-loop/harness-config.yaml — this repository's settings for theloop
version: "0.2.0"
ticketing:
  github: {owner: %s, repo: %s}
workflow:
  specDir: docs/specs
  phaseLabelPrefix: "loop:"
notifications:
  events:
    phase-approval-pending: [approver]
    pr-review-pending: [approver]
`, owner, repo)
}

// Collaborators is the demo repository's .the-loop/collaborators.yaml with
// one approver.
func Collaborators(login, name string) string {
	return fmt.Sprintf("collaborators:\n  - {login: %s, name: %s, roles: [approver]}\n", login, name)
}

// InitRepo makes dir a git repository adopting the-loop for GitHub
// owner/repo (harness config, one approver, a README), on branch main,
// committed. dir must exist and be empty.
func InitRepo(ctx context.Context, dir, owner, repo, approver string) error {
	git := run.Exec{}
	files := map[string]string{
		".the-loop/harness-config.yaml": HarnessConfig(owner, repo),
		".the-loop/collaborators.yaml":  Collaborators(approver, approver),
		"README.md":                     "# widgets\n\nA sample repository for the theloop demo.\n",
	}
	for rel, content := range files {
		p := filepath.Join(dir, filepath.FromSlash(rel))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"add", "-A"},
		{"commit", "-q", "-m", "chore: adopt the-loop"},
	} {
		c := run.Git(append([]string{"-c", "user.name=demo", "-c", "user.email=demo@demo.invalid"}, args...)...)
		c.Dir = dir
		if _, err := git.Run(ctx, c); err != nil {
			return fmt.Errorf("git %s in %s: %w", args[0], dir, err)
		}
	}
	return nil
}
