package integrations

// buildIntegrations is the real Factory.Integrations.
func buildIntegrations(cfg *loop.CLIConfig, sink graph.Sink) (graph.Integrations, []string, error) {
	ic := integrations.DefaultConfig()
	if cfg.Integrations != nil {
		var err error
		if ic, err = integrations.DecodeConfig(cfg.Integrations); err != nil {
			return nil, nil, err
		}
	}
	set, err := integrations.New(ic, integrations.Deps{Env: os.LookupEnv, Runner: run.Exec{}, Sink: sink})
	if err != nil {
		return nil, nil, err
	}
	if cfg.Integrations != nil {
		return set, nil, nil
	}
	// Nothing configured: GitHub is tried the default way (a token, else
	// gh). When neither is there, the ticket's side effects are skipped
	// with one warning rather than failing every hook.
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
	set *integrations.Set
	off map[string]string
}

func (o optionalProviders) Call(ctx context.Context, op graph.Operation, args map[string]any) (map[string]any, error) {
	if why, ok := o.off[op.Provider()]; ok {
		return nil, fmt.Errorf("%s unavailable (%s): %w", op.Provider(), why, graph.ErrUnsupportedOperation)
	}
	return o.set.Call(ctx, op, args)
}
