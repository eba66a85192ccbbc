package dashboard

import (
	"net/http"
	"regexp"
	"strings"

	"github.com/theloop-dev/theloop/internal/scrub"
	"github.com/theloop-dev/theloop/loop"
)

// The Settings page (/settings): the configuration loopd runs with, each
// key's value and where it came from (the file, the environment, a
// default, derived) — the rows `loopctl config show` prints, from the same
// resolved settings. Read-only: the configuration is the operator's file,
// changed there and reloaded (docs/decisions.md §11 — a page that edits it
// would be a second, unaudited way to widen who may pass a gate).
//
// Secrets never reach it: loopd reads every credential from the
// environment or a file and the settings hold only their names, but a URL
// may carry a password (queue.url, routing.workspace.cloneUrl) and a free
// block (integrations) anything. So every value is redacted here, whatever
// the Source sent: a key that names a credential shows only whether it is
// set, a URL loses its user information, and the rest passes the scrubber
// (Deps.Scrub, the daemon's: its known secrets and token shapes).

// Setting is one configuration key as the Settings page shows it.
type Setting struct {
	Key string
	// Value is the value loopd uses (any type loop.Settings records); the
	// page prints it as `loopctl config show` does (loop.ShowValue), after
	// redaction.
	Value any
	// Source is file, env, default or derived.
	Source string
}

// shownSetting is a Setting as the template shows it.
type shownSetting struct {
	Key, Value, Source string
}

// credentialKey matches the last segment of a key that holds a credential
// itself (not the name of the variable or file it is read from).
var credentialKey = regexp.MustCompile(`(?i)(token|secret|password|passwd|apikey|api_key|privatekey|seed|credential)$`)

// urlUserinfo finds user information in a URL ("scheme://user:pass@").
var urlUserinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s]*@`)

// redactNested replaces, inside a free block (integrations, usage.rates),
// every value under a key that names a credential.
func redactNested(v any) any {
	switch x := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			if credentialKey.MatchString(k) && e != nil && e != "" {
				out[k] = scrub.Redacted
			} else {
				out[k] = redactNested(e)
			}
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = redactNested(e)
		}
		return out
	}
	return v
}

// redactSetting is what the page may show of s.
func redactSetting(in Setting, scrubText func(string) string) shownSetting {
	s := shownSetting{Key: in.Key, Value: loop.ShowValue(redactNested(in.Value)), Source: in.Source}
	last := s.Key
	if i := strings.LastIndexAny(last, ".$"); i >= 0 {
		last = last[i+1:]
	}
	if credentialKey.MatchString(last) && s.Value != "" && s.Value != `""` && s.Value != "(not set)" && !strings.HasPrefix(s.Key, "$") {
		s.Value = scrub.Redacted
	}
	s.Value = urlUserinfo.ReplaceAllString(s.Value, "${1}"+scrub.Redacted+"@")
	s.Value = (*scrub.Scrubber)(nil).String(s.Value) // the token shapes, whatever Deps.Scrub knows
	if scrubText != nil {
		s.Value = scrubText(s.Value)
	}
	s.Value = clip(s.Value, 2000)
	return s
}

type settingsPage struct {
	Title  string
	Rows   []shownSetting
	Filter string
	Total  int
	Note   string
}

// settings renders the Settings page, optionally filtered by a key prefix
// (?key=routing.).
func (d *Dashboard) settings(w http.ResponseWriter, r *http.Request, _ *session) {
	p := settingsPage{Title: "Settings", Filter: clip(strings.TrimSpace(r.URL.Query().Get("key")), maxQueryParam)}
	var rows []Setting
	if d.deps.Settings != nil {
		rows = d.deps.Settings()
	}
	p.Total = len(rows)
	if d.deps.SettingsNote != nil {
		p.Note = clip(d.deps.SettingsNote(), 4000)
		if d.deps.Scrub != nil {
			p.Note = d.deps.Scrub(p.Note)
		}
	}
	for _, s := range rows {
		if p.Filter != "" && !strings.Contains(strings.ToLower(s.Key), strings.ToLower(p.Filter)) {
			continue
		}
		p.Rows = append(p.Rows, redactSetting(s, d.deps.Scrub))
	}
	d.render(w, "settings.html", p)
}
