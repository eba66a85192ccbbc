package integrations

import (
	"context"
	"fmt"

	"github.com/theloop-dev/theloop/graph"
)

// Optional builds the integrations an operator's CLI config asks for (raw
// is its integrations section; nil: none configured) — what loopctl's
// verbs and `loopd mcp` use. A configured section is strict: its providers
// are New's. With nothing configured GitHub is tried the default way (a
// token, else gh), and when neither is there the ticket's side effects
// are skipped with one warning (returned) rather than failing every hook.
func Optional(raw map[string]any, deps Deps) (graph.Integrations, []string, error) {
	ic := DefaultConfig()
	if raw != nil {
		var err error
		if ic, err = DecodeConfig(raw); err != nil {
			return nil, nil, err
		}
	}
	set, err := New(ic, deps)
	if err != nil {
		return nil, nil, err
	}
	if raw != nil {
		return set, nil, nil
	}
	off := map[string]string{}
	var warns []string
	for _, p := range set.Providers() {
		if p.Unavailable != "" {
			off[p.Name] = p.Unavailable
			warns = append(warns, fmt.Sprintf("integrations: %s is unavailable (%s); ticket side effects are skipped — configure integrations in the CLI config to make this an error", p.Name, p.Unavailable))
		}
	}
	if len(off) == 0 {
		return set, nil, nil
	}
	return optionalProviders{set: set, off: off}, warns, nil
}

// optionalProviders answers calls to unavailable providers as not
// configured, so hooks skip them instead of recording a failure each time.
type optionalProviders struct {
	set *Set
	off map[string]string
}

func (o optionalProviders) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	if why, ok := o.off[op.Provider()]; ok {
		return nil, fmt.Errorf("%s unavailable (%s): %w", op.Provider(), why, graph.ErrUnsupportedOperation)
	}
	return o.set.Call(ctx, op, args)
}
