package loop

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// usage.rates and routing.budget are read into Settings.Usage; a bad
// price, kind or fraction is refused naming the key.
func TestUsageSettings(t *testing.T) {
	load := func(t *testing.T, yaml string) (CLIConfig, error) {
		e := newCLIEnv(t)
		p := filepath.Join(e.work, "c.yaml")
		require.NoError(t, os.WriteFile(p, []byte(yaml), 0o644))
		return LoadCLIConfig(e.source(p))
	}
	cfg, err := load(t, `usage:
  rates:
    claude-sonnet-4-5: {input: 3, output: 15, cacheWrite: 3.75, cacheRead: 0.3}
    gpt-5: {input: 1.25, output: 10}
  pollSeconds: 2
routing:
  budget:
    warnAt: 0.9
    item: {tokens: 2000000, cost: 25}
    repositoryDaily: {cost: 100.5}
`)
	require.NoError(t, err)
	u := cfg.Settings.Usage
	require.Equal(t, ModelRate{Input: 3, Output: 15, CacheWrite: 3.75, CacheRead: 0.3}, u.Rates["claude-sonnet-4-5"])
	require.Equal(t, ModelRate{Input: 1.25, Output: 10}, u.Rates["gpt-5"])
	require.Equal(t, BudgetSettings{WarnAt: 0.9, ItemTokens: 2000000, ItemCost: 25, DayCost: 100.5}, u.Budget)
	require.Equal(t, "2s", u.Poll.String())

	cfg, err = load(t, "")
	require.NoError(t, err)
	require.Equal(t, BudgetSettings{WarnAt: 0.8}, cfg.Settings.Usage.Budget, "no caps by default")
	require.Empty(t, cfg.Settings.Usage.Rates)

	for yaml, want := range map[string]string{
		"usage: {rates: {m: {input: -1}}}\n":                 "usage.rates.m.input",
		"usage: {rates: {m: {inptu: 1}}}\n":                  "usage.rates.m.inptu: unknown kind",
		"usage: {rates: {m: 3}}\n":                           "usage.rates.m: must be a mapping",
		"routing: {budget: {warnAt: 1.5}}\n":                 "routing.budget.warnAt",
		"routing: {budget: {item: {tokens: -3}}}\n":          "routing.budget.item.tokens",
		"routing: {budget: {itme: {tokens: 3}}}\n":           "routing.budget.itme",
		"routing: {budget: {repositoryDaily: {cost: -1}}}\n": "routing.budget.repositoryDaily.cost",
	} {
		_, err := load(t, yaml)
		require.ErrorContains(t, err, want, yaml)
	}
}
