package daemon

import (
	"log/slog"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/scrub"
	"github.com/theloop-dev/theloop/loop/daemon/sandbox"
)

// Every line loopd logs, every event it writes, every text it pastes into
// an agent's session passes one scrubber (docs/daemon.md §11.6): the
// credentials this configuration makes loopd hold, plus text shaped like a
// well-known token. The integrations scrub their own errors the same way
// before loopd ever sees them.

// knownSecrets are the credential values cfg makes loopd hold: the webhook
// secret, the service token, and the current values of every variable loopd
// or an integration reads a credential from.
func knownSecrets(cfg Config, env func(string) (string, bool)) []string {
	out := []string{string(cfg.Secret), cfg.Service.Token}
	for _, n := range append(append([]string(nil), sandbox.SecretEnv...), cfg.SecretEnvNames...) {
		if n == "" || n == "THE_LOOP_TRUST_KEYS" { // public keys: nothing to hide
			continue
		}
		if v, ok := env(n); ok {
			out = append(out, v)
		}
	}
	return out
}

func newScrubber(cfg Config, env func(string) (string, bool)) *scrub.Scrubber {
	return scrub.New(knownSecrets(cfg, env)...)
}

// ScrubLogger returns l with every record scrubbed of the credentials cfg
// makes loopd hold (read through env, os.LookupEnv when nil) and of
// token-shaped text: what cmd/loopd wraps its logger in before logging
// anything.
func ScrubLogger(l *slog.Logger, cfg Config, env func(string) (string, bool)) *slog.Logger {
	if env == nil {
		env = func(string) (string, bool) { return "", false }
	}
	return slog.New(newScrubber(cfg, env).Handler(l.Handler()))
}

// scrubEvent returns e with every field value scrubbed.
func scrubEvent(s *scrub.Scrubber, e graph.LogEvent) graph.LogEvent {
	fields := make([]graph.Field, len(e.Fields))
	for i, f := range e.Fields {
		fields[i] = graph.Field{Key: f.Key, Value: s.Value(f.Value)}
	}
	e.Fields = fields
	return e
}
