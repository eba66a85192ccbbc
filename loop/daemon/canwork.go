package daemon

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/integrations"
	"github.com/theloop-dev/theloop/loop"
)

// ErrCannotWork marks a configuration loopd would start with "healthy" and
// then fail on every item (docs/decisions.md §20): loopd exits 2 at
// start instead, naming the key and the fix.
var ErrCannotWork = errors.New("loopd cannot work with this configuration")

// CheckCanWork reports, all at once, why cfg cannot serve anything: no
// repository is served (every event would be dropped as
// repository-not-bound), or the shipped graphs need an integration
// operation the configured transports cannot do — a GitHub transport
// without credentials included. It is the capability check `loopctl`
// applies to a repository's graph (integrations.Set.Verify), over every
// shipped loop. A provider that is simply not configured (Slack, Jira) is
// a deliberate absence whose hooks skip; GitHub is not optional. deps
// carries the environment the integrations read; it makes no request.
// `loopd demo` configures itself and does not call it.
func CheckCanWork(cfg Config, deps integrations.Deps) error {
	var problems []string
	// The state root holds the decision-signing key, the queue, the
	// control socket: inside a checkout the agent could read the key (and
	// loopd used to fall back to recording decisions unsigned).
	if repo := loop.EnclosingCheckout(cfg.StateRoot); cfg.StateRoot != "" && repo != "" {
		problems = append(problems, fmt.Sprintf("the state root %s is inside the git checkout %s: the signing key, the queue and the control socket must never be in a repository — pass --state-root (or set THE_LOOP_STATE_ROOT, or state.root) to a directory outside it, e.g. ~/.the-loop", cfg.StateRoot, repo))
	}
	if len(cfg.Repositories) == 0 {
		problems = append(problems, "no repository is served: set repositories: [owner/repo] (or polling.sources[].repos) in the CLI config — every event would be dropped as repository-not-bound")
	}
	set, err := integrations.New(cfg.Integrations, deps)
	if err != nil {
		problems = append(problems, fmt.Sprintf("integrations: %v", err))
	} else {
		// One line per provider and reason, with the operations it stops.
		type key struct{ provider, transport, reason string }
		ops := map[key][]string{}
		var order []key
		for _, name := range loop.ShippedLoopNames() {
			g, err := loop.ShippedGraph(name)
			if err != nil {
				return err
			}
			var ve *integrations.VerifyError
			if err := set.Verify(g); !errors.As(err, &ve) {
				continue
			}
			for _, p := range ve.Problems {
				if errors.Is(p.Err, integrations.ErrProviderNotConfigured) && p.Provider != "github" {
					continue
				}
				k := key{p.Provider, p.Transport, p.Reason}
				if _, ok := ops[k]; !ok {
					order = append(order, k)
				}
				if op := string(p.Operation); !slices.Contains(ops[k], op) {
					ops[k] = append(ops[k], op)
				}
			}
		}
		for _, k := range order {
			msg := fmt.Sprintf("integrations.%s", k.provider)
			if k.transport != "" {
				msg += " (transport " + k.transport + ")"
			}
			msg += fmt.Sprintf(": %s; the shipped graphs need %s", k.reason, strings.Join(ops[k], ", "))
			problems = append(problems, msg)
		}
	}
	if len(problems) == 0 {
		return nil
	}
	return fmt.Errorf("%w:\n  - %s", ErrCannotWork, strings.Join(problems, "\n  - "))
}
