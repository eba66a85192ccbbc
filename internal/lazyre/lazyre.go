// Package lazyre provides regular expressions compiled on first use. The
// Stop hook is a process that starts on every agent turn; package-level
// regexp.MustCompile calls in the packages it links would make every start
// pay for patterns that turn is unlikely to need.
package lazyre

import (
	"regexp"
	"sync"
)

// Regexp is a regular expression compiled the first time it is used. The
// pattern must compile (as with regexp.MustCompile, a bad pattern panics —
// at first use instead of at start-up; tests exercise every pattern).
type Regexp struct {
	expr string
	once sync.Once
	re   *regexp.Regexp
}

// New returns a lazily compiled expr.
func New(expr string) *Regexp { return &Regexp{expr: expr} }

// RE returns the compiled expression.
func (r *Regexp) RE() *regexp.Regexp {
	r.once.Do(func() { r.re = regexp.MustCompile(r.expr) })
	return r.re
}

// MatchString reports whether s contains a match.
func (r *Regexp) MatchString(s string) bool { return r.RE().MatchString(s) }

// FindStringSubmatch is regexp.Regexp.FindStringSubmatch.
func (r *Regexp) FindStringSubmatch(s string) []string { return r.RE().FindStringSubmatch(s) }

// FindAllStringSubmatch is regexp.Regexp.FindAllStringSubmatch.
func (r *Regexp) FindAllStringSubmatch(s string, n int) [][]string {
	return r.RE().FindAllStringSubmatch(s, n)
}

// ReplaceAllString is regexp.Regexp.ReplaceAllString.
func (r *Regexp) ReplaceAllString(src, repl string) string { return r.RE().ReplaceAllString(src, repl) }

// String returns the pattern.
func (r *Regexp) String() string { return r.expr }
