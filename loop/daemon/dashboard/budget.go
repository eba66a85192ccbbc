package dashboard

import (
	"context"
	"time"
)

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
