package integrations

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// AppManifestOptions shape the manifest of GitHub's App-manifest flow
// (docs.github.com: "Registering a GitHub App from a manifest").
type AppManifestOptions struct {
	// Name is the App's name (default "theloop").
	Name string
	// URL is the App's homepage (default the project's).
	URL string
	// WebhookURL is where GitHub delivers events: loopd's
	// webhooks.ghWebhook address as the internet reaches it. Empty: the
	// manifest's hook is inactive until set on the App's page.
	WebhookURL string
	// Rules are routing.authorized's rules: team: and codeowners add the
	// organisation-members read permission, codeowners contents read.
	Rules []string
}

// AppPermissions are the permissions the shipped graphs need, and no
// more: issues and pull requests read-write (comments, labels, reactions),
// checks and metadata read, repository hooks read (redelivery of missed
// deliveries).
func AppPermissions() map[string]string {
	return map[string]string{"issues": "write", "pull_requests": "write", "checks": "read", "metadata": "read", "repository_hooks": "read"}
}

// appEvents are the webhook events those permissions let the App receive
// that loopd handles.
var appEvents = []string{EventIssues, EventIssueComment, EventPullRequest, EventPullRequestReview, EventPullRequestReviewComment, EventCheckRun, EventCheckSuite}

// AppManifest returns the manifest JSON.
func AppManifest(o AppManifestOptions) ([]byte, error) {
	name := orDefault(o.Name, "theloop")
	home := orDefault(o.URL, "https://github.com/theloop-dev/theloop")
	if _, err := url.ParseRequestURI(home); err != nil {
		return nil, fmt.Errorf("--url %q is not an absolute URL", home)
	}
	perms := AppPermissions()
	for _, r := range o.Rules {
		switch {
		case strings.HasPrefix(r, "team:"):
			perms["members"] = "read"
		case r == "codeowners":
			perms["members"] = "read" // teams named in CODEOWNERS
			perms["contents"] = "read"
		}
	}
	hook := map[string]any{"active": false}
	if o.WebhookURL != "" {
		u, err := url.ParseRequestURI(o.WebhookURL)
		if err != nil || u.Scheme != "https" && !isLoopback(u.Hostname()) {
			return nil, fmt.Errorf("--webhook-url %q is not an https URL", o.WebhookURL)
		}
		hook = map[string]any{"url": o.WebhookURL, "active": true}
	}
	m := map[string]any{
		"name": name, "url": home, "hook_attributes": hook, "public": false,
		"default_permissions": perms, "default_events": slices.Clone(appEvents),
	}
	return json.MarshalIndent(m, "", "  ")
}
