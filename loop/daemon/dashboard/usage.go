package dashboard

import (
	"context"
	"time"
)

// Usage on the board and the item page (docs/usage.md): the board row's
// figure is Item.Usage; the item page asks a UsageSource for the item's
// usage per node and per session. Every cost is labelled an estimate.

// UsageBar is one node's (or session's) usage on the item page.
type UsageBar struct {
	Node       string
	Tokens     int64
	TokensText string
	Turns      int64
	// Cost is the estimated cost ("—" when a model has no rate).
	Cost string
	// Blocked counts the blocked attempts at the node.
	Blocked int
	// Percent is the bar's length (0–200) against the largest node.
	Percent int
}

// UsageView is the item page's usage section.
type UsageView struct {
	Rows     []UsageBar
	Sessions []UsageBar
	Total    UsageBar
	// Budget says where the item stands against its budget ("" none).
	Budget string
	Note   string
}

// UsageSource is implemented by a Source that counts usage.
type UsageSource interface {
	ItemUsage(ctx context.Context, ref string) *UsageView
	// FleetUsage is the fleet's usage per day and repository, newest day
	// first (nil: nothing counted).
	FleetUsage(ctx context.Context) *FleetUsage
}

// FleetUsage is the metrics page's usage per day and repository.
type FleetUsage struct {
	Rows []FleetRow
	Note string
}

// FleetRow is one day's usage of one repository.
type FleetRow struct {
	Day, Repository string
	Tokens          int64
	TokensText      string
	Turns           int64
	Cost            string
}

// itemUsage is ref's usage section (nil: none counted, or no source).
func (d *Dashboard) itemUsage(ctx context.Context, ref string) *UsageView {
	us, ok := d.deps.Source.(UsageSource)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return us.ItemUsage(ctx, ref)
}

// fleetUsage is the metrics page's fleet view (nil: none, or no source).
func (d *Dashboard) fleetUsage(ctx context.Context) *FleetUsage {
	us, ok := d.deps.Source.(UsageSource)
	if !ok {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	return us.FleetUsage(ctx)
}

// Budget is a work item near or at its budget cap (routing.budget,
// docs/usage.md), for "needs you".
type Budget struct {
	Ref string
	// Why says which cap and how far, and what lets it go on.
	Why string
	// Capped is set when the cap paused the session.
	Capped bool
	Since  time.Time
}

// BudgetSource is implemented by a Source that knows the items near or at
// their budget caps.
type BudgetSource interface {
	Budgets(ctx context.Context) ([]Budget, error)
}
