package ingress

import (
	"fmt"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/loop"
)

// DefaultSecretEnv names the variable holding the webhook secret.
const DefaultSecretEnv = "THE_LOOP_GH_WEBHOOK_SECRET"

// ConfigFromCLI maps the operator's cli-config.yaml onto the receiver's and
// the poller's configuration:
//
//	webhooks.ghWebhook.path / .events / .secretEnv   → Path, Events, Secret (read from that variable)
//	repositories ∪ polling.sources[].repos            → Repositories (the bound)
//	routing.authorizedUsers / .autoExecuteLabel       → AuthorizedUsers, AutoExecuteLabel
//	routing.control.enabled / .keywords               → Control
//	routing.dedupCacheSize                            → DedupSize
//	polling.intervalSeconds / .maxRetries / .sources  → PollerConfig
//	state.root                                        → PollerConfig.StateRoot
//
// lookupEnv reads the secret (os.LookupEnv in production). insecure is the
// value of loopd's --insecure-accept-unsigned. A mistyped key is an error
// naming it; the result is not yet validated (NewReceiver does that).
func ConfigFromCLI(cli loop.CLIConfig, lookupEnv func(string) (string, bool), insecure bool) (Config, PollerConfig, error) {
	cfg := DefaultConfig()
	cfg.InsecureAcceptUnsigned = insecure
	var problems []string
	raw := cli.Raw
	str := func(path string) string {
		v, ok := rawGet(raw, path)
		if !ok || v == nil {
			return ""
		}
		s, ok := v.(string)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s must be a string", path))
		}
		return strings.TrimSpace(s)
	}
	list := func(path string, v any) []string {
		if v == nil {
			return nil
		}
		items, ok := v.([]any)
		if !ok {
			problems = append(problems, fmt.Sprintf("%s must be a list of strings", path))
			return nil
		}
		var out []string
		for _, it := range items {
			s, ok := it.(string)
			if !ok {
				problems = append(problems, fmt.Sprintf("%s must be a list of strings", path))
				return nil
			}
			if s = strings.TrimSpace(s); s != "" {
				out = append(out, s)
			}
		}
		return out
	}
	number := func(path string) (int, bool) {
		v, ok := rawGet(raw, path)
		if !ok || v == nil {
			return 0, false
		}
		switch n := v.(type) {
		case int:
			return n, true
		case int64:
			return int(n), true
		case uint64:
			return int(min(n, 1<<31)), true
		case float64:
			if n == float64(int(n)) {
				return int(n), true
			}
		}
		problems = append(problems, fmt.Sprintf("%s must be a whole number", path))
		return 0, false
	}

	if p := str("webhooks.ghWebhook.path"); p != "" {
		cfg.Path = p
	}
	if v, ok := rawGet(raw, "webhooks.ghWebhook.events"); ok {
		if evs := list("webhooks.ghWebhook.events", v); len(evs) > 0 {
			cfg.Events = evs
		}
	}
	secretEnv := str("webhooks.ghWebhook.secretEnv")
	if secretEnv == "" {
		secretEnv = DefaultSecretEnv
	}
	if lookupEnv != nil {
		if s, ok := lookupEnv(secretEnv); ok && s != "" {
			cfg.Secret = []byte(s)
		}
	}
	if v, ok := rawGet(raw, "repositories"); ok {
		cfg.Repositories = list("repositories", v)
	}
	cfg.AuthorizedUsers = append([]string(nil), cli.AuthorizedUsers...)
	if l := str("routing.autoExecuteLabel"); l != "" {
		cfg.AutoExecuteLabel = l
	}
	if v, ok := rawGet(raw, "routing.control.enabled"); ok {
		if b, isBool := v.(bool); isBool {
			cfg.Control.Disabled = !b
		} else if v != nil {
			problems = append(problems, "routing.control.enabled must be true or false")
		}
	}
	for _, c := range Commands() {
		if kw, ok := cli.Keywords[string(c)]; ok {
			cfg.Control.Keywords[c] = kw
		}
	}
	if n, ok := number("routing.dedupCacheSize"); ok && n > 0 {
		cfg.DedupSize = n
	}

	pc := PollerConfig{StateRoot: cli.StateRoot}
	if n, ok := number("polling.intervalSeconds"); ok && n > 0 {
		pc.Interval = time.Duration(n) * time.Second
	}
	if n, ok := number("polling.maxRetries"); ok && n > 0 {
		pc.MaxRetries = n
	}
	if v, ok := rawGet(raw, "polling.sources"); ok && v != nil {
		srcs, isList := v.([]any)
		if !isList {
			problems = append(problems, "polling.sources must be a list")
		}
		for i, s := range srcs {
			m, _ := s.(map[string]any)
			key := fmt.Sprintf("polling.sources[%d]", i)
			if m == nil {
				problems = append(problems, key+" must be a mapping")
				continue
			}
			if p, _ := m["provider"].(string); p != "github" {
				problems = append(problems, fmt.Sprintf("%s.provider must be github (the only polling provider), not %q", key, clipText(fmt.Sprint(m["provider"]), 30)))
				continue
			}
			src := PollSource{Repos: list(key+".repos", m["repos"])}
			if l, ok := m["label"].(string); ok {
				src.Label = strings.TrimSpace(l)
			}
			if mon, ok := m["monitor"].(map[string]any); ok {
				src.SkipIssues = mon["issues"] == false
				src.SkipPullRequests = mon["pullRequests"] == false
			}
			pc.Sources = append(pc.Sources, src)
			for _, r := range src.Repos {
				if !containsFold(cfg.Repositories, r) {
					cfg.Repositories = append(cfg.Repositories, r)
				}
			}
		}
	}
	if len(problems) > 0 {
		return Config{}, PollerConfig{}, fmt.Errorf("%w: %s: %s", ErrInvalidConfig, cli.Path, strings.Join(problems, "; "))
	}
	return cfg, pc, nil
}

func containsFold(list []string, s string) bool {
	for _, e := range list {
		if strings.EqualFold(e, s) {
			return true
		}
	}
	return false
}

// rawGet walks a dotted path through decoded YAML mappings.
func rawGet(m map[string]any, path string) (any, bool) {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		mm, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = mm[k]; !ok {
			return nil, false
		}
	}
	return cur, true
}
