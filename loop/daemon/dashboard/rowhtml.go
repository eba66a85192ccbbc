package dashboard

import (
	"html"
	"html/template"
	"strings"
)

// rowHTML writes a board row as the "row" template does (board.html; the
// template stays the source of the row the script clones), by hand: a
// board of 10,000 items spends ~90% of its render in html/template's
// reflection-driven escaping, and this keeps the server render of 10,000
// rows within the 50 ms. Every value is escaped with
// html.EscapeString (text and double-quoted attributes); the two URLs are
// ours or checked: URL is webURL's http(s) URL, Page an /item link with a
// query-escaped ref. The template test compares the two renderings.
func (r row) HTML() template.HTML {
	var b strings.Builder
	r.writeHTML(&b)
	return template.HTML(b.String())
}

// rowsHTML renders rows into one value, so the page template escapes
// nothing per row.
func rowsHTML(rows []row) template.HTML {
	var b strings.Builder
	b.Grow(len(rows) * 900)
	for _, r := range rows {
		r.writeHTML(&b)
	}
	return template.HTML(b.String())
}

func (r row) writeHTML(b *strings.Builder) {
	w := b.WriteString
	e := func(s string) { w(html.EscapeString(s)) }
	state := string(r.State)
	href := r.URL
	if href == "" {
		href = r.Page
	}
	title := r.Title
	if title == "" {
		title = "(untitled)"
	}
	live, liveClass := "dead", "down"
	if r.Live {
		live, liveClass = "live", "up"
	}
	w(`<tr data-ref="`)
	e(r.Ref)
	w(`" data-repo="`)
	e(r.Repo)
	w(`" data-state="`)
	e(state)
	w(`" class="state-`)
	e(state)
	w("\">\n<td data-f=\"repo\">")
	e(r.Repo)
	w("</td>\n<td><a data-f=\"ticket\" href=\"")
	e(href)
	w(`" rel="noopener noreferrer">`)
	e(r.Ref)
	w("</a></td>\n<td><a data-f=\"title\" href=\"")
	e(r.Page)
	w(`">`)
	e(title)
	w("</a></td>\n<td><span data-f=\"node\">")
	e(r.Node)
	w(`</span> <span class="phase" data-f="phase">`)
	e(r.Phase)
	w("</span></td>\n<td><span class=\"badge\" data-f=\"state\">")
	e(r.State.Label())
	w(`</span> <span class="finding" data-f="finding">`)
	e(r.Finding)
	w("</span></td>\n<td data-f=\"age\" data-since=\"")
	e(r.Since)
	w(`">`)
	e(r.Age)
	w("</td>\n<td><span data-f=\"live\" class=\"")
	w(liveClass)
	w(`">`)
	w(live)
	w(`</span> <button type="button" class="copy attach" data-f="attach" data-copy="`)
	e(r.Attach)
	w(`" title="`)
	e(r.Attach)
	w(`">copy attach</button> <span class="cost" data-f="cost" title="estimate (docs/usage.md)">`)
	e(r.Cost)
	w("</span></td>\n<td data-f=\"last\">")
	e(r.LastEvent)
	w("</td>\n<td><span data-f=\"ci\">")
	e(r.CI)
	w(`</span> <a data-f="cifail" class="cifail" href="`)
	if r.CIFailURL != "" {
		e(r.CIFailURL)
	} else {
		w("#")
	}
	w(`" rel="noopener noreferrer">`)
	e(r.CIFail)
	w("</a></td>\n</tr>")
}
