package integrations

import (
	"context"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/internal/scrub"
	"github.com/theloop-dev/theloop/run"
)

// redacted replaces a credential wherever it would appear in text.
const redacted = scrub.Redacted

// redactor scrubs every credential the Set has seen from text: the one
// scrubber (internal/scrub) every log line, event and error of theloop
// passes, fed with the values this Set reads. Errors get the token shapes
// scrubbed too; results read from a service (comment bodies) only the
// known secrets, so a person's words are never altered. It is safe for
// concurrent use; the zero value is ready.
type redactor struct {
	s scrub.Scrubber
}

// add registers a secret, and the encodings under which it could appear
// (basic-auth base64).
func (r *redactor) add(secret string) { r.s.Add(secret) }

func (r *redactor) scrub(s string) string { return r.s.String(s) }

// scrubValue returns v with the known secrets removed from every string,
// recursing into the JSON-shaped containers results are made of.
func (r *redactor) scrubValue(v any) any {
	switch x := v.(type) {
	case string:
		return r.s.Known(x)
	case map[string]any:
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = r.scrubValue(e)
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = r.scrubValue(e)
		}
		return out
	case []string:
		out := make([]string, len(x))
		for i, e := range x {
			out[i] = r.s.Known(e)
		}
		return out
	}
	return v
}

// secret reads one credential: the first non-empty variable of env, else the
// output of command (run once, then kept in memory). It is read at call time
// so a rotated variable takes effect without a restart. Every value read is
// registered with the redactor before it is returned.
type secret struct {
	what    string   // "GitHub token", for messages
	env     []string // variable names, in order
	command []string // optional secret-store argv
	fix     string   // how to provide it, for messages

	lookup Env
	runner run.Runner
	red    *redactor

	mu     sync.Mutex
	cached string
}

// present reports whether a value could be obtained without running
// anything: a variable is set, or a command is configured.
func (s *secret) present() bool {
	for _, name := range s.env {
		if v, ok := s.lookup(name); ok && strings.TrimSpace(v) != "" {
			return true
		}
	}
	return len(s.command) > 0
}

func (s *secret) get(ctx context.Context) (string, error) {
	for _, name := range s.env {
		if v, ok := s.lookup(name); ok && strings.TrimSpace(v) != "" {
			v = strings.TrimSpace(v)
			s.red.add(v)
			return v, nil
		}
	}
	if len(s.command) == 0 {
		return "", failFinal(ErrNoCredentials, "no %s: %s is not set — %s", s.what, envList(s.env), s.fix)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cached != "" {
		return s.cached, nil
	}
	// A token command (gh auth token, a password manager) reads its own
	// login from these, handed over by name; nothing else of loopd's
	// environment reaches it.
	res, err := s.runner.Run(ctx, run.Cmd{Name: s.command[0], Args: s.command[1:], Timeout: 10 * time.Second, Env: run.Passthrough(tokenCommandEnv...)})
	// The command's output may hold the secret: never quote it.
	if err != nil {
		return "", failFinal(ErrNoCredentials, "no %s: %s is not set and the token command %s failed (exit %d) — %s", s.what, envList(s.env), s.command[0], res.ExitCode, s.fix)
	}
	v := strings.TrimSpace(string(res.Stdout))
	if v == "" {
		return "", failFinal(ErrNoCredentials, "no %s: the token command %s printed nothing — %s", s.what, s.command[0], s.fix)
	}
	s.red.add(v)
	s.cached = v
	return v, nil
}

func envList(names []string) string {
	switch len(names) {
	case 0:
		return "no variable"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " or " + names[len(names)-1]
}

// registerEnv scrubs the current values of variables that may hold
// credentials even when this Set does not use them itself (GH_TOKEN under
// the cli transport is gh's, but it must not leak through gh's stderr).
func registerEnv(red *redactor, lookup Env, names ...string) {
	for _, n := range names {
		if v, ok := lookup(n); ok {
			red.add(v)
		}
	}
}

// tokenCommandEnv are the variables a token command may need beyond
// run.BaseEnv: where its configuration and session live.
var tokenCommandEnv = []string{
	"XDG_CONFIG_HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_RUNTIME_DIR", "DBUS_SESSION_BUS_ADDRESS",
	"GNUPGHOME", "GPG_AGENT_INFO", "SSH_AUTH_SOCK", "GH_CONFIG_DIR", "GH_HOST", "PASSWORD_STORE_DIR",
}
