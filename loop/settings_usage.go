package loop

import (
	"fmt"
	"math"
	"sort"
	"time"
)

// ModelRate is one model's price per million tokens of each kind.
type ModelRate struct {
	Input, Output, CacheWrite, CacheRead float64
}

// UsageSettings are usage.* and routing.budget (docs/usage.md).
type UsageSettings struct {
	// Rates is usage.rates: model name (or prefix) → price.
	Rates map[string]ModelRate
	// Poll is usage.pollSeconds.
	Poll   time.Duration
	Budget BudgetSettings
}

// BudgetSettings is routing.budget. A zero cap is no cap.
type BudgetSettings struct {
	WarnAt                float64
	ItemTokens, DayTokens int64
	ItemCost, DayCost     float64
}

// rateKinds are a usage.rates entry's keys.
var rateKinds = []string{"input", "output", "cacheWrite", "cacheRead"}

func readUsageRates(r *settingsReader, s *Settings) {
	v := r.free("usage.rates")
	if v == nil {
		return
	}
	m, ok := v.(map[string]any)
	if !ok {
		r.add(fmt.Sprintf("usage.rates: must be a mapping of model → {%s} per million tokens, not %T", joinKinds(), v))
		return
	}
	s.Usage.Rates = make(map[string]ModelRate, len(m))
	models := make([]string, 0, len(m))
	for k := range m {
		models = append(models, k)
	}
	sort.Strings(models)
	for _, model := range models {
		e, ok := m[model].(map[string]any)
		if !ok {
			r.add(fmt.Sprintf("usage.rates.%s: must be a mapping {%s} (per million tokens)", model, joinKinds()))
			continue
		}
		var rt ModelRate
		for k, raw := range e {
			f, ok := toFloat(raw)
			if !ok || f < 0 || math.IsInf(f, 0) || math.IsNaN(f) {
				r.add(fmt.Sprintf("usage.rates.%s.%s: %v is not a price (a number ≥ 0 per million tokens)", model, k, raw))
				continue
			}
			switch k {
			case "input":
				rt.Input = f
			case "output":
				rt.Output = f
			case "cacheWrite":
				rt.CacheWrite = f
			case "cacheRead":
				rt.CacheRead = f
			default:
				r.add(fmt.Sprintf("usage.rates.%s.%s: unknown kind (the kinds are %s)", model, k, joinKinds()))
			}
		}
		s.Usage.Rates[model] = rt
	}
}

func joinKinds() string {
	out := ""
	for i, k := range rateKinds {
		if i > 0 {
			out += ", "
		}
		out += k
	}
	return out
}

func toFloat(v any) (float64, bool) {
	switch n := v.(type) {
	case int:
		return float64(n), true
	case int64:
		return float64(n), true
	case uint64:
		return float64(n), true
	case float64:
		return n, true
	}
	return 0, false
}

func readBudgetWarnAt(r *settingsReader, s *Settings) {
	s.Usage.Budget.WarnAt = r.number("routing.budget.warnAt", false)
	if w := s.Usage.Budget.WarnAt; !(w > 0 && w <= 1) {
		r.add(fmt.Sprintf("routing.budget.warnAt: %v must be a fraction above 0 and at most 1 (0.8 warns at 80%% of a cap)", w))
	}
}

func (r *settingsReader) budgetTokens(path string) int64 {
	n := r.number(path, true)
	if n < 0 {
		r.add(path + ": must be 0 (no cap) or a positive number of tokens")
		return 0
	}
	return int64(n)
}

func (r *settingsReader) budgetCost(path string) float64 {
	n := r.number(path, false)
	if n < 0 || math.IsInf(n, 0) || math.IsNaN(n) {
		r.add(path + ": must be 0 (no cap) or a positive estimated cost")
		return 0
	}
	return n
}
