// Package scrub removes credentials from text before it leaves the process:
// every line loopd logs, every event it writes, every excerpt it pastes
// into an agent's session and every error it shows passes one Scrubber.
//
// It removes two kinds of credential: the known secrets the process was
// configured with (the webhook secret, the tokens its integrations read),
// exactly and in their base64 form (basic auth carries email:token so), and
// text shaped like a well-known token whoever it belongs to — GitHub's
// ghp_/gho_/ghu_/ghs_/ghr_ and github_pat_ tokens, Slack's xox?- tokens and
// webhook URLs, Atlassian API tokens, AWS access key ids, and the value of a
// Bearer or Basic authorization. Each is replaced by Redacted.
//
// A Scrubber never panics and never lets a secret it knows grow back: the
// replacement is applied until the text holds none (a secret overlapping
// the marker cannot be reassembled), and text that still would is replaced
// whole. The nil *Scrubber applies the patterns only.
package scrub

import (
	"encoding/base64"
	"regexp"
	"sort"
	"strings"
	"sync"
)

// Redacted replaces a credential wherever it would appear.
const Redacted = "[redacted]"

// MinSecretLen: shorter known values are not scrubbed (they would mangle
// ordinary text and protect nothing).
const MinSecretLen = 6

// shape is a token shape scrubbed whatever its owner. A group named keep
// is kept (the scheme of an authorization), the rest replaced. hint is a
// substring every match holds (in the lower-cased text when fold is set),
// so that text without it skips the regular expression: the clean line is
// the common one.
type shape struct {
	re   *regexp.Regexp
	hint []string
	fold bool
}

// patterns compiles the shapes on first use rather than in package init:
// loopctl links this package through its integrations and most of its
// processes never scrub a line (the compile is ~290 allocations and a
// millisecond of start-up on every claim).
var patterns = sync.OnceValue(func() []shape {
	return []shape{
		{regexp.MustCompile(`\bgh[pousr]_[A-Za-z0-9]{20,}`), []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_"}, false},
		{regexp.MustCompile(`\bgithub_pat_[A-Za-z0-9_]{20,}`), []string{"github_pat_"}, false},
		{regexp.MustCompile(`\bxox[abposr]-[A-Za-z0-9-]{10,}`), []string{"xox"}, false},
		{regexp.MustCompile(`hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]+`), []string{"hooks.slack.com/"}, false},
		{regexp.MustCompile(`\bATATT[A-Za-z0-9_=-]{20,}`), []string{"ATATT"}, false},
		{regexp.MustCompile(`\b(?:AKIA|ASIA)[0-9A-Z]{16}\b`), []string{"AKIA", "ASIA"}, false},
		{regexp.MustCompile(`(?i)(?P<keep>\b(?:bearer|basic)\s+)[A-Za-z0-9._~+/=-]{8,}`), []string{"bearer", "basic"}, true},
	}
})

func hinted(text, lower string, hint []string, fold bool) bool {
	in := text
	if fold {
		in = lower
	}
	for _, h := range hint {
		if strings.Contains(in, h) {
			return true
		}
	}
	return false
}

// Scrubber holds the known secrets. It is safe for concurrent use.
// CredentialEnv are the variables theloop's programs read a credential
// from by default (an operator may rename some; loopd adds those): what
// no agent session gets, and what every log and state file is scrubbed of.
// THE_LOOP_TRUST_KEYS holds public keys: kept from agents (a session must
// not choose its own trust anchor), never scrubbed.
var CredentialEnv = []string{
	"THE_LOOP_GH_WEBHOOK_SECRET",
	"GH_TOKEN", "GITHUB_TOKEN", "GH_ENTERPRISE_TOKEN", "GITHUB_ENTERPRISE_TOKEN",
	"THE_LOOP_SERVICE_TOKEN",
	"THE_LOOP_SLACK_BOT_TOKEN", "THE_LOOP_SLACK_WEBHOOK_URL", "THE_LOOP_SLACK_APP_TOKEN", "THE_LOOP_SLACK_SIGNING_SECRET",
	"THE_LOOP_JIRA_EMAIL", "THE_LOOP_JIRA_TOKEN",
	"THE_LOOP_TRUST_KEYS",
}

// FromEnv is a scrubber of the current values of CredentialEnv (but the
// trust keys) and of names, read through lookup, and of token shapes.
func FromEnv(lookup func(string) (string, bool), names ...string) *Scrubber {
	var secrets []string
	for _, n := range append(append([]string(nil), CredentialEnv...), names...) {
		if n == "" || n == "THE_LOOP_TRUST_KEYS" {
			continue
		}
		if v, ok := lookup(n); ok && v != "" {
			secrets = append(secrets, v)
		}
	}
	return New(secrets...)
}

type Scrubber struct {
	mu      sync.RWMutex
	secrets []string // longest first
}

// New returns a Scrubber knowing secrets (values shorter than MinSecretLen
// are ignored).
func New(secrets ...string) *Scrubber {
	s := &Scrubber{}
	s.Add(secrets...)
	return s
}

// Add registers more secrets, and the base64 encodings under which they
// could appear.
func (s *Scrubber) Add(secrets ...string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, v := range secrets {
		v = strings.TrimSpace(v)
		if len(v) < MinSecretLen {
			continue
		}
		for _, form := range []string{v, base64.StdEncoding.EncodeToString([]byte(v)), strings.TrimRight(base64.StdEncoding.EncodeToString([]byte(v)), "=")} {
			if len(form) >= MinSecretLen && !contains(s.secrets, form) {
				s.secrets = append(s.secrets, form)
			}
		}
	}
	// Longest first, so a secret containing another is replaced whole.
	sort.SliceStable(s.secrets, func(i, j int) bool { return len(s.secrets[i]) > len(s.secrets[j]) })
}

func contains(list []string, v string) bool {
	for _, x := range list {
		if x == v {
			return true
		}
	}
	return false
}

// shortMarker stands in for a secret that is part of Redacted itself
// ("redacted"): shorter than any secret, so it can hold none, and every
// replacement shrinks the text, so replacing ends.
const shortMarker = "***"

func markerFor(secret string) string {
	if strings.Contains(Redacted, secret) {
		return shortMarker
	}
	return Redacted
}

// maxPasses bounds the replace-until-clean loop; text still holding a
// secret after it is replaced whole.
const maxPasses = 8

// String returns text without credentials.
func (s *Scrubber) String(text string) string { return s.clean(text, true) }

// Known returns text without the known secrets, leaving token-shaped text
// of others as it is: for data read back from a service (a comment's body),
// where a pattern could alter a person's words.
func (s *Scrubber) Known(text string) string { return s.clean(text, false) }

func (s *Scrubber) clean(text string, shapes bool) string {
	var known []string
	if s != nil {
		s.mu.RLock()
		known = s.secrets
		s.mu.RUnlock()
	}
	for pass := 0; ; pass++ {
		before := text
		for _, secret := range known {
			if strings.Contains(text, secret) {
				text = strings.ReplaceAll(text, secret, markerFor(secret))
			}
		}
		if shapes {
			lower := strings.ToLower(text)
			for _, p := range patterns() {
				if hinted(text, lower, p.hint, p.fold) {
					text = replacePattern(p.re, text)
				}
			}
		}
		if text == before {
			// A pass that changed nothing found nothing: every known
			// secret is replaced by a marker that does not hold it, and
			// no shape matches its own replacement.
			return text
		}
		if pass == maxPasses {
			if !holds(known, text, shapes) {
				return text
			}
			if !holds(known, Redacted, shapes) {
				return Redacted
			}
			return shortMarker
		}
	}
}

func replacePattern(re *regexp.Regexp, text string) string {
	keep := re.SubexpIndex("keep")
	if keep < 0 {
		return re.ReplaceAllLiteralString(text, Redacted)
	}
	return re.ReplaceAllStringFunc(text, func(m string) string {
		sub := re.FindStringSubmatch(m)
		if sub == nil {
			return Redacted
		}
		return sub[keep] + Redacted
	})
}

// holds reports whether text still holds a known secret or a pattern.
func holds(known []string, text string, shapes bool) bool {
	for _, secret := range known {
		if strings.Contains(text, secret) {
			return true
		}
	}
	for _, p := range patterns() {
		if !shapes {
			break
		}
		if m := p.re.FindString(text); m != "" && !strings.HasSuffix(m, Redacted) {
			return true
		}
	}
	return false
}

// Error returns err with a scrubbed message; errors.Is and errors.As still
// see the original chain. nil stays nil.
func (s *Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	clean := s.String(msg)
	if clean == msg {
		return err
	}
	return &scrubbed{msg: clean, err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }

// Value returns v with every string scrubbed, recursing into the
// JSON-shaped containers events and results are made of; an error becomes
// its scrubbed text.
func (s *Scrubber) Value(v any) any {
	switch x := v.(type) {
	case string:
		return s.String(x)
	case error:
		return s.String(x.Error())
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = s.Value(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.Value(e)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = s.String(e)
		}
		return out
	}
	return v
}

var _ error = (*scrubbed)(nil)
