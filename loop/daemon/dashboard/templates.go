package dashboard

import (
	"html/template"
)

// parseTemplates parses the embedded pages. Every value reaches the page
// through html/template's contextual escaping; no template uses a
// template.HTML, template.JS or template.URL conversion, so nothing a work
// item's text holds can become markup, script or a javascript: link.
func parseTemplates(banner string) (*template.Template, error) {
	return template.New("").Funcs(template.FuncMap{
		"stateLabel": func(s State) string { return s.Label() },
		"banner":     func() string { return banner },
	}).ParseFS(embedded, "templates/*.html")
}
