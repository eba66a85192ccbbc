package apiserver

import (
	"net/http"
	"slices"
	"strings"

	"github.com/theloop-dev/theloop/loop/api"
)

// usage is GET /usage: what the agent sessions spent (api.UsageReport),
// for one item (item=REF) or all, grouped by by= (node by default).
func (s *Server) usage(_ http.ResponseWriter, r *http.Request) (any, error) {
	q := r.URL.Query()
	uq := api.UsageQuery{Item: q.Get("item"), By: q.Get("by"), Repository: q.Get("repository")}
	if uq.By != "" && !slices.Contains(api.UsageGroupings, uq.By) {
		return nil, badRequest("by %q: use one of %s", uq.By, strings.Join(api.UsageGroupings, ", "))
	}
	if s.b.Usage == nil {
		return nil, unavailable("usage")
	}
	return s.b.Usage(r.Context(), uq)
}
