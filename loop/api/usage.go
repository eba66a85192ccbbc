package api

import (
	"context"
	"net/url"
)

// UsagePath is GET /usage: what agent sessions spent (UsageReport). Its
// query takes item=REF (one work item; none: all), by=node|session|day|
// model|item (how the rows are grouped; default node) and
// repository=OWNER/REPO.
const UsagePath = "/usage"

// UsageGroupings are the values of by= (and of `loopctl usage --by`).
var UsageGroupings = []string{"node", "session", "day", "model", "item", "repository"}

// UsageTokens are tokens by kind.
type UsageTokens struct {
	Input      int64 `json:"input"`
	Output     int64 `json:"output"`
	CacheWrite int64 `json:"cacheWrite"`
	CacheRead  int64 `json:"cacheRead"`
	Total      int64 `json:"total"`
}

// UsageRow is one group's usage.
type UsageRow struct {
	// Key is the group's value (a node, session, day, model, item or
	// repository; "" for the total).
	Key    string      `json:"key"`
	Tokens UsageTokens `json:"tokens"`
	Turns  int64       `json:"turns"`
	Models []string    `json:"models,omitempty"`
	// Cost is the estimated cost from the rate card; nil when a model in
	// the group has no rate ("—"). It is an estimate: see Estimate.
	Cost *float64 `json:"cost"`
	// Unpriced lists the group's models without a rate.
	Unpriced []string `json:"unpriced,omitempty"`
}

// UsageReport answers GET /usage.
type UsageReport struct {
	Item string     `json:"item,omitempty"`
	By   string     `json:"by"`
	Rows []UsageRow `json:"rows"`
	// Total sums the rows.
	Total UsageRow `json:"total"`
	// Estimate labels every cost: tokens are the harness's own record,
	// cost is tokens × the configured rates (docs/usage.md).
	Estimate string `json:"estimate"`
	// Unknown lists sessions whose harness keeps no record theloop reads
	// (their usage is unknown, not zero).
	Unknown []string `json:"unknown,omitempty"`
	// Budget is the item's budget state when Item is set.
	Budget *UsageBudget `json:"budget,omitempty"`
}

// UsageBudget is where an item stands against routing.budget.
type UsageBudget struct {
	// Scope is "item" or "repository-day"; Limit is what the cap is (a
	// token count or an estimated cost), Used what was spent against it.
	Scope  string  `json:"scope"`
	Unit   string  `json:"unit"`
	Limit  float64 `json:"limit"`
	Used   float64 `json:"used"`
	State  string  `json:"state"` // ok, warned, capped, released
	Reason string  `json:"reason,omitempty"`
}

// UsageQuery is GET /usage's query.
type UsageQuery struct {
	Item, By, Repository string
}

// Usage asks the daemon what agent sessions spent.
func (c *Client) Usage(ctx context.Context, q UsageQuery) (UsageReport, error) {
	v := url.Values{}
	if q.Item != "" {
		v.Set("item", q.Item)
	}
	if q.By != "" {
		v.Set("by", q.By)
	}
	if q.Repository != "" {
		v.Set("repository", q.Repository)
	}
	var out UsageReport
	err := c.Do(ctx, "GET", UsagePath, v, nil, &out)
	return out, err
}
