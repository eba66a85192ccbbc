package loop

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Scenarios are the Gherkin scenarios a repository's tests carry: the
// .feature files, and the "Scenario:" blocks written into test code as doc
// comments or docstrings (Given/When/Then lines under a Scenario line).
// `loopctl scenarios` lists them for the agent writing a testing plan or
// checking one against the tests; it reads files and runs nothing.
//
// Which files are read: the globs given on the command line, else the
// harness config's testing.integrationTestGlobs, else DefaultScenarioGlobs.
// Every file is read inside the repository only (no link is followed, a
// pattern leaving the tree is refused) and within size bounds, as the
// agent can write all of them.

// DefaultScenarioGlobs are read when neither --glob nor
// testing.integrationTestGlobs names files.
var DefaultScenarioGlobs = []string{"**/*.feature"}

// Bounds on what a scenario scan reads.
const (
	maxScenarioFileBytes = 1 << 20
	maxScenarioFiles     = 5000
	maxScenarioSteps     = 200
)

// Scenario is one Gherkin scenario.
type Scenario struct {
	// File is the path relative to the repository root, slash-separated.
	File string `json:"file"`
	// Line is the Scenario line's number (1-based).
	Line int `json:"line"`
	// Feature is the .feature file's Feature title ("" in test code).
	Feature string `json:"feature,omitempty"`
	// Keyword is Scenario, Scenario Outline or Example.
	Keyword string `json:"keyword"`
	Title   string `json:"title"`
	// Steps are the Given/When/Then/And/But lines, keyword included.
	Steps []string `json:"steps"`
}

// ScenarioScan is what FindScenarios read.
type ScenarioScan struct {
	// Globs are the patterns used and Source where they came from (flag,
	// testing.integrationTestGlobs, default).
	Globs  []string `json:"globs"`
	Source string   `json:"source"`
	// Files is how many files matched.
	Files     int        `json:"files"`
	Scenarios []Scenario `json:"scenarios"`
	// Warnings name files skipped (too large, unreadable) and bad entries.
	Warnings []string `json:"warnings,omitempty"`
}

// ScenarioGlobs returns the patterns to read and where they came from:
// flags, else testing.integrationTestGlobs, else the defaults. A bad entry
// in the config is left out with a warning naming it.
func ScenarioGlobs(h HarnessConfig, flags []string) (globs []string, source string, warns []string) {
	if len(flags) > 0 {
		return flags, "flag", nil
	}
	testing, _ := h.Raw["testing"].(map[string]any)
	if raw, ok := testing["integrationTestGlobs"]; ok && raw != nil {
		file := h.Path
		if file == "" {
			file = HarnessConfigFile
		}
		list, ok := raw.([]any)
		if !ok {
			return DefaultScenarioGlobs, "default", []string{fmt.Sprintf("%s: testing.integrationTestGlobs is %s, not a list of globs; e.g. [\"tests/**/*_integration_test.go\"]", file, typeName(raw))}
		}
		for i, v := range list {
			s, ok := v.(string)
			if !ok || strings.TrimSpace(s) == "" {
				warns = append(warns, fmt.Sprintf("%s: testing.integrationTestGlobs[%d] is not a glob; left out", file, i))
				continue
			}
			globs = append(globs, s)
		}
		if len(globs) > 0 {
			return globs, "testing.integrationTestGlobs", warns
		}
	}
	return DefaultScenarioGlobs, "default", warns
}

// ErrBadGlob: a pattern is malformed or leaves the repository.
var ErrBadGlob = errors.New("bad glob")

// checkGlob refuses a pattern that is absolute, climbs out of the tree or
// does not parse.
func checkGlob(g string) error {
	if strings.HasPrefix(g, "/") || filepath.IsAbs(g) {
		return fmt.Errorf("%w: %q is absolute; globs are relative to the repository root", ErrBadGlob, g)
	}
	for _, seg := range strings.Split(g, "/") {
		if seg == ".." {
			return fmt.Errorf("%w: %q leaves the repository", ErrBadGlob, g)
		}
		if seg == "**" {
			continue
		}
		if _, err := path.Match(seg, ""); err != nil {
			return fmt.Errorf("%w: %q: %v", ErrBadGlob, g, err)
		}
	}
	return nil
}

// MatchGlob reports whether the slash-separated relative name matches the
// pattern, where "*", "?" and "[...]" match within one path segment (as
// path.Match) and a "**" segment matches any number of segments, none
// included. A malformed pattern matches nothing.
func MatchGlob(pattern, name string) bool {
	pat, segs := strings.Split(pattern, "/"), strings.Split(name, "/")
	// ok[i][j]: pat[i:] matches segs[j:]. Filled from the end, so the cost
	// is len(pat)*len(segs) segment matches whatever the pattern.
	ok := make([][]bool, len(pat)+1)
	for i := range ok {
		ok[i] = make([]bool, len(segs)+1)
	}
	ok[len(pat)][len(segs)] = true
	for i := len(pat) - 1; i >= 0; i-- {
		for j := len(segs); j >= 0; j-- {
			if pat[i] == "**" {
				ok[i][j] = ok[i+1][j] || j < len(segs) && ok[i][j+1]
				continue
			}
			if j == len(segs) {
				continue
			}
			m, err := path.Match(pat[i], segs[j])
			ok[i][j] = err == nil && m && ok[i+1][j+1]
		}
	}
	return ok[0][0]
}

// FindScenarios reads the scenarios of the files under root that match
// globs. It follows no link, skips .git, and bounds the files read and
// their size; a malformed or escaping glob is an error naming it.
func FindScenarios(root string, globs []string) (ScenarioScan, error) {
	scan := ScenarioScan{Globs: globs, Scenarios: []Scenario{}}
	for _, g := range globs {
		if err := checkGlob(g); err != nil {
			return scan, err
		}
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if p == root {
				return err
			}
			return nil
		}
		if d.IsDir() {
			if d.Name() == ".git" || d.Name() == "node_modules" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil // links and devices are not followed
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return nil
		}
		rel = filepath.ToSlash(rel)
		for _, g := range globs {
			if MatchGlob(g, rel) {
				files = append(files, rel)
				break
			}
		}
		if len(files) > maxScenarioFiles {
			return fmt.Errorf("more than %d files match %s; narrow the globs", maxScenarioFiles, strings.Join(globs, ", "))
		}
		return nil
	})
	if err != nil {
		return scan, err
	}
	sort.Strings(files)
	scan.Files = len(files)
	for _, rel := range files {
		data, err := readRegularWithin(filepath.Join(root, filepath.FromSlash(rel)), maxScenarioFileBytes)
		if err != nil {
			scan.Warnings = append(scan.Warnings, fmt.Sprintf("%s: %v; skipped", rel, err))
			continue
		}
		scan.Scenarios = append(scan.Scenarios, ParseScenarios(rel, data)...)
	}
	return scan, nil
}

// readRegularWithin reads a regular file of at most limit bytes, refusing
// a link.
func readRegularWithin(p string, limit int64) ([]byte, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file")
	}
	if fi.Size() > limit {
		return nil, fmt.Errorf("%d bytes, more than the %d read", fi.Size(), limit)
	}
	return os.ReadFile(p)
}

// scenarioKeywords open a scenario, longest first.
var scenarioKeywords = []string{"Scenario Outline", "Scenario Template", "Scenario", "Example"}

// stepKeywords open a step.
var stepKeywords = []string{"Given", "When", "Then", "And", "But", "*"}

// gherkinText strips what a doc comment or docstring puts before the text:
// indentation, //, #, /*, *, and triple quotes.
func gherkinText(line string) string {
	s := strings.TrimSpace(line)
	for _, p := range []string{`"""`, "'''", "///", "//", "/**", "/*", "#", "*/", "* ", "--"} {
		if strings.HasPrefix(s, p) && !(p == "* " && isStep(s)) {
			s = strings.TrimSpace(s[len(p):])
			break
		}
	}
	return strings.TrimSpace(strings.TrimSuffix(strings.TrimSuffix(s, `"""`), "'''"))
}

func isStep(s string) bool {
	for _, k := range stepKeywords {
		if strings.HasPrefix(s, k+" ") {
			return true
		}
	}
	return false
}

// ParseScenarios reads the scenarios in one file's bytes: Feature and
// Scenario blocks of a .feature file, or Scenario blocks written in a test
// file's comments and docstrings. In test code a scenario ends at the first
// line that is neither a step nor blank nor a table row; in a .feature file
// at the next Scenario or Feature. It never panics.
func ParseScenarios(file string, data []byte) []Scenario {
	var out []Scenario
	feature := ""
	var cur *Scenario
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	n := 0
	flush := func() {
		if cur != nil {
			out = append(out, *cur)
			cur = nil
		}
	}
	for sc.Scan() {
		n++
		s := gherkinText(sc.Text())
		if t, ok := strings.CutPrefix(s, "Feature:"); ok {
			flush()
			feature = strings.TrimSpace(t)
			continue
		}
		opened := false
		for _, k := range scenarioKeywords {
			if t, ok := strings.CutPrefix(s, k+":"); ok {
				flush()
				cur = &Scenario{File: file, Line: n, Keyword: k, Title: strings.TrimSpace(t), Steps: []string{}}
				if strings.HasSuffix(file, ".feature") {
					cur.Feature = feature
				}
				opened = true
				break
			}
		}
		if opened || cur == nil {
			continue
		}
		switch {
		case isStep(s):
			if len(cur.Steps) < maxScenarioSteps {
				cur.Steps = append(cur.Steps, s)
			}
		case s == "", strings.HasPrefix(s, "|"), strings.HasPrefix(s, "@"), strings.HasPrefix(s, "Examples:"):
		case strings.HasSuffix(file, ".feature"):
			// A .feature file's scenario runs to the next keyword; free
			// text under its title is its description.
		default:
			flush()
		}
	}
	flush()
	return out
}
