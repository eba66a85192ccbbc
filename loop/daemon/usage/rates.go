package usage

import "strings"

// Rate is one model's price, per million tokens of each kind, in the
// operator's currency (usage.rates in the configuration).
type Rate struct {
	Input      float64 `json:"input"`
	Output     float64 `json:"output"`
	CacheWrite float64 `json:"cacheWrite"`
	CacheRead  float64 `json:"cacheRead"`
}

// Rates is the rate card: model name → rate. A model is priced by the
// entry of its exact name, else by the longest entry it starts with
// ("claude-sonnet-4-5" prices "claude-sonnet-4-5-20250929").
type Rates map[string]Rate

// For returns model's rate; false when the card has none.
func (r Rates) For(model string) (Rate, bool) {
	if rt, ok := r[model]; ok {
		return rt, true
	}
	best, found := "", false
	for k := range r {
		if strings.HasPrefix(model, k) && len(k) > len(best) {
			best, found = k, true
		}
	}
	return r[best], found
}

// Cost estimates what t cost under model's rate; false when unpriced.
func (r Rates) Cost(model string, t Tokens) (float64, bool) {
	rt, ok := r.For(model)
	if !ok {
		return 0, false
	}
	return (float64(t.Input)*rt.Input + float64(t.Output)*rt.Output + float64(t.CacheWrite)*rt.CacheWrite + float64(t.CacheRead)*rt.CacheRead) / 1e6, true
}

// EstimateNote is the label every cost carries.
const EstimateNote = "estimate: the harness's own token counts × usage.rates; excludes anything the record does not show (see docs/usage.md)"
