package jirasim

import (
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// The JQL the stand-in understands: clauses joined by AND —
//
//	project = KEY | project in (KEY, KEY…)
//	updated >= "-15m" | "-2h" | "-1d" (relative to the stand-in's clock) |
//	           "yyyy/MM/dd HH:mm" | "yyyy-MM-dd HH:mm" (UTC)
//
// and an optional ORDER BY updated [ASC|DESC]. Anything else is answered
// 400 as Jira answers a query it cannot parse, so a client that sends more
// than this finds out here rather than in production.

var (
	jqlProject   = regexp.MustCompile(`^project\s*=\s*"?([A-Z][A-Z0-9_]*)"?$`)
	jqlProjectIn = regexp.MustCompile(`^project\s+in\s*\(([^)]*)\)$`)
	jqlUpdated   = regexp.MustCompile(`^updated\s*>=\s*"([^"]+)"$`)
	jqlRelative  = regexp.MustCompile(`^-([0-9]{1,6})([mhd])$`)
	jqlAnd       = regexp.MustCompile(`(?i)\s+AND\s+`)
	jqlOrder     = regexp.MustCompile(`(?i)\s+ORDER\s+BY\s+updated(\s+(ASC|DESC))?\s*$`)
)

type jqlQuery struct {
	projects []string
	since    time.Time
	desc     bool
}

func (s *Server) parseJQL(q string) (jqlQuery, bool) {
	var out jqlQuery
	q = strings.TrimSpace(q)
	if m := jqlOrder.FindStringSubmatch(q); m != nil {
		out.desc = strings.EqualFold(m[2], "DESC")
		q = strings.TrimSpace(q[:len(q)-len(m[0])])
	}
	if q == "" {
		return out, false
	}
	for _, c := range jqlAnd.Split(q, -1) {
		c = strings.TrimSpace(c)
		switch {
		case jqlProject.MatchString(c):
			out.projects = append(out.projects, jqlProject.FindStringSubmatch(c)[1])
		case jqlProjectIn.MatchString(c):
			for _, p := range strings.Split(jqlProjectIn.FindStringSubmatch(c)[1], ",") {
				p = strings.Trim(strings.TrimSpace(p), `"`)
				if !jqlProject.MatchString("project = " + p) {
					return out, false
				}
				out.projects = append(out.projects, p)
			}
		case jqlUpdated.MatchString(c):
			v := jqlUpdated.FindStringSubmatch(c)[1]
			if m := jqlRelative.FindStringSubmatch(v); m != nil {
				n, _ := strconv.Atoi(m[1])
				unit := map[string]time.Duration{"m": time.Minute, "h": time.Hour, "d": 24 * time.Hour}[m[2]]
				out.since = s.cfg.Now().Add(-time.Duration(n) * unit).Truncate(time.Minute)
				continue
			}
			var err error
			if out.since, err = time.Parse("2006/01/02 15:04", v); err != nil {
				if out.since, err = time.Parse("2006-01-02 15:04", v); err != nil {
					return out, false
				}
			}
		default:
			return out, false
		}
	}
	return out, true
}

// search serves GET /rest/api/2/search/jql (s.mu held): issues matching
// the query, paged by nextPageToken (an offset here; opaque to clients).
func (s *Server) search(w http.ResponseWriter, r *http.Request) {
	q, ok := s.parseJQL(r.URL.Query().Get("jql"))
	if !ok {
		jiraError(w, http.StatusBadRequest, "Error in the JQL Query: the stand-in does not understand "+strconv.Quote(r.URL.Query().Get("jql")))
		return
	}
	var found []*Issue
	for _, is := range s.issues {
		project, _, _ := strings.Cut(is.Key, "-")
		if len(q.projects) > 0 && !slices.Contains(q.projects, project) {
			continue
		}
		if !q.since.IsZero() && is.Updated.Before(q.since) {
			continue
		}
		found = append(found, is)
	}
	slices.SortFunc(found, func(a, b *Issue) int {
		c := a.Updated.Compare(b.Updated)
		if c == 0 {
			c = strings.Compare(a.Key, b.Key)
		}
		if q.desc {
			return -c
		}
		return c
	})
	start, _ := strconv.Atoi(r.URL.Query().Get("nextPageToken"))
	size, err := strconv.Atoi(r.URL.Query().Get("maxResults"))
	if err != nil || size <= 0 || size > 100 {
		size = 50
	}
	start = min(max(start, 0), len(found))
	end := min(start+size, len(found))
	out := make([]any, 0, end-start)
	for _, is := range found[start:end] {
		out = append(out, map[string]any{"id": strings.TrimLeft(is.Key, "ABCDEFGHIJKLMNOPQRSTUVWXYZ_-"), "key": is.Key,
			"fields": map[string]any{"updated": is.Updated.Format(TimeFormat)}})
	}
	ans := map[string]any{"issues": out, "isLast": end == len(found)}
	if end < len(found) {
		ans["nextPageToken"] = strconv.Itoa(end)
	}
	writeJSON(w, http.StatusOK, ans)
}
