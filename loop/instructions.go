package loop

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// Instruction docs are the documents a repository asks every agent working
// in it to read first — its conventions, a company-wide style guide — named
// in the harness config:
//
//	customInstructions:
//	  - docs/CONVENTIONS.md
//	  - {path: ~/company/engineering-handbook.md, description: "house rules"}
//
// `loopctl instructions` resolves them (a relative path against the
// repository root, "~/" against the home directory, an absolute path as
// is, so a company-wide doc outside the repository resolves too) and says
// which exist. The report carries each doc's path, size and SHA-256, never
// its contents: the agent reads the files itself, and nothing a doc says
// rides out through a report that CI logs or a dashboard shows.

// maxInstructionDocs bounds the docs one configuration names.
const maxInstructionDocs = 100

// InstructionDoc is one resolved instruction doc.
type InstructionDoc struct {
	// Path is the path as configured (or given with --doc).
	Path string `json:"path"`
	// Resolved is the absolute path it names.
	Resolved    string `json:"resolved"`
	Description string `json:"description,omitempty"`
	// Source is customInstructions or flag.
	Source string `json:"source"`
	// InRepository says whether the doc lies inside the repository.
	InRepository bool `json:"inRepository"`
	// Exists: a regular file (links are followed for docs outside the
	// repository only; inside it a link is not a doc).
	Exists bool   `json:"exists"`
	Bytes  int64  `json:"bytes,omitempty"`
	SHA256 string `json:"sha256,omitempty"`
	// Problem says why the doc does not resolve.
	Problem string `json:"problem,omitempty"`
}

// Instructions is what `loopctl instructions` reports.
type Instructions struct {
	Docs []InstructionDoc `json:"docs"`
	// Warnings name bad entries of customInstructions.
	Warnings []string `json:"warnings,omitempty"`
}

// Missing counts the docs that do not resolve.
func (in Instructions) Missing() int {
	n := 0
	for _, d := range in.Docs {
		if !d.Exists {
			n++
		}
	}
	return n
}

// InstructionEntry is one configured or flagged doc before resolution.
type InstructionEntry struct {
	Path, Description, Source string
}

// InstructionEntries reads customInstructions: a list whose entries are a
// path or {path, description}, or the-loop's {docs: <that list>}; a bad entry is left out with a warning
// naming it.
func InstructionEntries(h HarnessConfig) ([]InstructionEntry, []string) {
	raw, ok := h.Raw["customInstructions"]
	if !ok || raw == nil {
		return nil, nil
	}
	file := h.Path
	if file == "" {
		file = HarnessConfigFile
	}
	if m, isMap := raw.(map[string]any); isMap {
		// the-loop's own shape: {docs: [...], onMissing: warn}.
		raw = m["docs"]
	}
	list, ok := raw.([]any)
	if raw == nil {
		return nil, nil
	}
	if !ok {
		return nil, []string{fmt.Sprintf("%s: customInstructions is %s, not a list; e.g. [docs/CONVENTIONS.md]", file, typeName(raw))}
	}
	var out []InstructionEntry
	var warns []string
	for i, v := range list {
		if len(out) == maxInstructionDocs {
			warns = append(warns, fmt.Sprintf("%s: customInstructions names more than %d docs; the rest are left out", file, maxInstructionDocs))
			break
		}
		e := InstructionEntry{Source: "customInstructions"}
		switch x := v.(type) {
		case string:
			e.Path = x
		case map[string]any:
			e.Path, _ = x["path"].(string)
			e.Description, _ = x["description"].(string)
		}
		if strings.TrimSpace(e.Path) == "" || strings.ContainsRune(e.Path, 0) {
			warns = append(warns, fmt.Sprintf("%s: customInstructions[%d] names no path; give a path or {path: ..., description: ...}", file, i))
			continue
		}
		out = append(out, e)
	}
	return out, warns
}

// ResolveInstructions resolves entries against the repository root and the
// home directory ("" when unknown: a "~/" path then does not resolve).
func ResolveInstructions(root, home string, entries []InstructionEntry) Instructions {
	in := Instructions{Docs: []InstructionDoc{}}
	for _, e := range entries {
		in.Docs = append(in.Docs, resolveInstruction(root, home, e))
	}
	return in
}

func resolveInstruction(root, home string, e InstructionEntry) InstructionDoc {
	d := InstructionDoc{Path: e.Path, Description: e.Description, Source: e.Source}
	p := e.Path
	switch {
	case p == "~" || strings.HasPrefix(p, "~/"):
		if home == "" {
			d.Problem = "the home directory is unknown"
			return d
		}
		p = filepath.Join(home, strings.TrimPrefix(p, "~"))
	case !filepath.IsAbs(p):
		p = filepath.Join(root, filepath.FromSlash(p))
	}
	d.Resolved = filepath.Clean(p)
	rel, err := filepath.Rel(root, d.Resolved)
	d.InRepository = err == nil && filepath.IsLocal(rel)
	var fi os.FileInfo
	if d.InRepository {
		// Inside the repository the agent writes the files: a link is not
		// followed out of the tree.
		fi, err = os.Lstat(d.Resolved)
	} else {
		fi, err = os.Stat(d.Resolved)
	}
	switch {
	case err != nil:
		d.Problem = "not found"
		if !os.IsNotExist(err) {
			d.Problem = "unreadable"
		}
		return d
	case !fi.Mode().IsRegular():
		d.Problem = "not a regular file"
		return d
	}
	f, err := os.Open(d.Resolved)
	if err != nil {
		d.Problem = "unreadable"
		return d
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, 64<<20))
	if err != nil {
		d.Problem = "unreadable"
		return d
	}
	d.Exists, d.Bytes, d.SHA256 = true, n, hex.EncodeToString(h.Sum(nil))
	return d
}
