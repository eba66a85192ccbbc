package sessions

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// What loopd needs to know about a session's checkout — which branch is
// checked out, which URL origin names — it reads from files, never by
// running git there: the checkout is the agent's, and git run in it reads
// the agent's configuration, attributes and hooks (docs/decisions.md §22).
// The readers bound every read, open no file through a symbolic link, and
// fail closed on anything they do not understand.

// ErrCheckoutUnreadable: a checkout's git files are missing, too large, a
// symbolic link, or in a shape the reader does not understand.
var ErrCheckoutUnreadable = errors.New("checkout unreadable")

const (
	// maxHeadBytes bounds .git/HEAD (a ref name or an object id).
	maxHeadBytes = 4 << 10
	// maxConfigBytes bounds a repository's config file.
	maxConfigBytes = 1 << 20
)

// ReadOnlyPaths returns the paths inside the clone dir that the agent's
// sandbox must mount read-only: what git (the agent's own, or a person's
// later in the same checkout) reads as configuration or runs — the config,
// hooks, info/ (attributes, excludes) and objects/info/ (alternates). Each
// exists in a clone Prepare made. Two more names matter if they appear,
// .git/commondir and .git/gitdir (they move where git reads its
// configuration from), but cannot be created empty without changing git's
// behaviour; a sandbox binds them read-only when present. Objects are not
// shared with any other repository, so nothing outside dir is listed.
func ReadOnlyPaths(dir string) []string {
	g := filepath.Join(dir, ".git")
	return []string{filepath.Join(g, "config"), filepath.Join(g, "hooks"), filepath.Join(g, "info"), filepath.Join(g, "objects", "info")}
}

// readFileNoFollow reads at most max bytes of path, refusing a symbolic
// link as the last component and a file larger than max.
func readFileNoFollow(path string, max int64) ([]byte, error) {
	fd, err := unix.Open(path, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckoutUnreadable, path, err)
	}
	f := os.NewFile(uintptr(fd), path)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil || !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%w: %s is not a regular file", ErrCheckoutUnreadable, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCheckoutUnreadable, path, err)
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCheckoutUnreadable, path, max)
	}
	return b, nil
}

// gitDirs returns a checkout's git directory and common directory: dir/.git
// for a clone; for a linked worktree (an older layout) the directory its
// .git file names, and that directory's commondir.
func gitDirs(dir string) (gitdir, common string, err error) {
	dotgit := filepath.Join(dir, ".git")
	fi, err := os.Lstat(dotgit)
	switch {
	case err != nil:
		return "", "", fmt.Errorf("%w: %s: %v", ErrCheckoutUnreadable, dotgit, err)
	case fi.IsDir():
		return dotgit, dotgit, nil
	case !fi.Mode().IsRegular():
		return "", "", fmt.Errorf("%w: %s is neither a directory nor a file", ErrCheckoutUnreadable, dotgit)
	}
	b, err := readFileNoFollow(dotgit, maxHeadBytes)
	if err != nil {
		return "", "", err
	}
	p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok || p == "" || strings.ContainsAny(p, "\n\r\x00") {
		return "", "", fmt.Errorf("%w: %s does not name a git directory", ErrCheckoutUnreadable, dotgit)
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	gitdir, common = filepath.Clean(p), filepath.Clean(p)
	if c, err := readFileNoFollow(filepath.Join(gitdir, "commondir"), maxHeadBytes); err == nil {
		cd := strings.TrimSpace(string(c))
		if cd == "" || strings.ContainsAny(cd, "\n\r\x00") {
			return "", "", fmt.Errorf("%w: %s/commondir is malformed", ErrCheckoutUnreadable, gitdir)
		}
		if !filepath.IsAbs(cd) {
			cd = filepath.Join(gitdir, cd)
		}
		common = filepath.Clean(cd)
	}
	return gitdir, common, nil
}

// CheckedOutBranch returns the branch checked out in the checkout dir, read
// from its HEAD file (bounded, no symbolic link followed) rather than from
// git. A detached HEAD, a symbolic ref outside refs/heads/ or a name that
// fails ValidateBranch is an error wrapping ErrCheckoutUnreadable. The
// answer is what the agent left there: data, never configuration.
func CheckedOutBranch(dir string) (string, error) {
	gitdir, _, err := gitDirs(dir)
	if err != nil {
		return "", err
	}
	b, err := readFileNoFollow(filepath.Join(gitdir, "HEAD"), maxHeadBytes)
	if err != nil {
		return "", err
	}
	ref, ok := strings.CutPrefix(strings.TrimRight(string(b), "\n"), "ref: ")
	if !ok {
		return "", fmt.Errorf("%w: %s has a detached HEAD", ErrCheckoutUnreadable, dir)
	}
	branch, ok := strings.CutPrefix(strings.TrimSpace(ref), "refs/heads/")
	if !ok || ValidateBranch(branch) != nil {
		return "", fmt.Errorf("%w: %s's HEAD names %q, not a branch", ErrCheckoutUnreadable, dir, ref)
	}
	return branch, nil
}

// OriginURL returns remote.origin.url of the checkout dir, parsed from its
// configuration file (and a linked worktree's config.worktree) by
// ParseGitConfig, never by running git. A file that includes another
// ([include], [includeIf]) is refused: what it pulls in is not read.
func OriginURL(dir string) (string, error) {
	gitdir, common, err := gitDirs(dir)
	if err != nil {
		return "", err
	}
	files := []string{filepath.Join(common, "config")}
	if gitdir != common {
		files = append(files, filepath.Join(gitdir, "config.worktree"))
	}
	url, found := "", false
	for i, f := range files {
		b, err := readFileNoFollow(f, maxConfigBytes)
		if err != nil {
			if i > 0 && errors.Is(err, ErrCheckoutUnreadable) {
				if _, serr := os.Lstat(f); errors.Is(serr, os.ErrNotExist) {
					continue
				}
			}
			return "", err
		}
		vals, err := ParseGitConfig(b)
		if err != nil {
			return "", fmt.Errorf("%w: %s: %v", ErrCheckoutUnreadable, f, err)
		}
		if v, ok := vals["remote.origin.url"]; ok && len(v) > 0 {
			url, found = v[len(v)-1], true
		}
	}
	if !found {
		return "", fmt.Errorf("%w: %s sets no remote.origin.url", ErrCheckoutUnreadable, dir)
	}
	return strings.TrimSpace(url), nil
}

// ParseGitConfig parses git configuration text (git-config(1), "Syntax")
// into its values by key — "section.key" or "section.subsection.key", the
// section and key lowercased, a subsection as written — each key's values
// in file order (git's --get answers the last). A key without "=" is the
// value "true". It refuses includes ([include], [includeIf "…"]): the
// caller would be reading a different file than it thinks. It never panics
// on any input (fuzzed), and is as strict as git about what a line may be.
func ParseGitConfig(text []byte) (map[string][]string, error) {
	if bytes.IndexByte(text, 0) >= 0 {
		return nil, errors.New("NUL byte in configuration")
	}
	p := &configParser{s: string(text), out: map[string][]string{}}
	if err := p.parse(); err != nil {
		return nil, fmt.Errorf("line %d: %w", p.line, err)
	}
	return p.out, nil
}

type configParser struct {
	s       string
	i       int
	line    int
	section string // "section" or "section.subsection", ready to prefix a key
	out     map[string][]string
}

func (p *configParser) peek() (byte, bool) {
	if p.i >= len(p.s) {
		return 0, false
	}
	return p.s[p.i], true
}

func (p *configParser) parse() error {
	p.line = 1
	if strings.HasPrefix(p.s, "\xef\xbb\xbf") {
		p.i = 3
	}
	for {
		c, ok := p.peek()
		switch {
		case !ok:
			return nil
		case c == '\n':
			p.i++
			p.line++
		case c == ' ' || c == '\t' || c == '\r':
			p.i++
		case c == '#' || c == ';':
			p.skipLine()
		case c == '[':
			if err := p.header(); err != nil {
				return err
			}
		case isKeyStart(c):
			if p.section == "" {
				return errors.New("a key before any section")
			}
			if err := p.variable(); err != nil {
				return err
			}
		default:
			return fmt.Errorf("unexpected %q", c)
		}
	}
}

func (p *configParser) skipLine() {
	for p.i < len(p.s) && p.s[p.i] != '\n' {
		p.i++
	}
}

func isKeyStart(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

func isKeyChar(c byte) bool { return isKeyStart(c) || c >= '0' && c <= '9' || c == '-' }

func (p *configParser) header() error {
	p.i++ // '['
	start := p.i
	for p.i < len(p.s) && (isKeyChar(p.s[p.i]) || p.s[p.i] == '.') {
		p.i++
	}
	name := strings.ToLower(p.s[start:p.i])
	if name == "" {
		return errors.New("empty section name")
	}
	c, ok := p.peek()
	switch {
	case ok && c == ']':
		p.i++
		// [section.sub] (deprecated): the subsection is lowercased.
		if strings.HasPrefix(name, ".") || strings.HasSuffix(name, ".") || strings.Contains(name, "..") {
			return fmt.Errorf("bad section [%s]", name)
		}
	case ok && (c == ' ' || c == '\t'):
		if strings.Contains(name, ".") {
			return fmt.Errorf("bad section [%s]", name)
		}
		for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
			p.i++
		}
		if c, ok := p.peek(); !ok || c != '"' {
			return errors.New("a subsection must be quoted")
		}
		p.i++
		var sub strings.Builder
		for {
			c, ok := p.peek()
			if !ok || c == '\n' {
				return errors.New("unterminated subsection")
			}
			p.i++
			if c == '"' {
				break
			}
			if c == '\\' {
				c, ok = p.peek()
				if !ok || c == '\n' {
					return errors.New("unterminated subsection")
				}
				p.i++
			}
			sub.WriteByte(c)
		}
		if c, ok := p.peek(); !ok || c != ']' {
			return errors.New("missing ] after the subsection")
		}
		p.i++
		name += "." + sub.String()
	default:
		return errors.New("unterminated section header")
	}
	base, _, _ := strings.Cut(name, ".")
	if base == "include" || base == "includeif" {
		return fmt.Errorf("[%s] includes another file; not read", base)
	}
	p.section = name
	return nil
}

func (p *configParser) variable() error {
	start := p.i
	for p.i < len(p.s) && isKeyChar(p.s[p.i]) {
		p.i++
	}
	key := p.section + "." + strings.ToLower(p.s[start:p.i])
	for p.i < len(p.s) && (p.s[p.i] == ' ' || p.s[p.i] == '\t') {
		p.i++
	}
	c, ok := p.peek()
	switch {
	case !ok || c == '\n' || c == '#' || c == ';' || c == '\r':
		p.skipLine()
		p.out[key] = append(p.out[key], "true")
		return nil
	case c != '=':
		return fmt.Errorf("bad key %q", key)
	}
	p.i++
	v, err := p.value()
	if err != nil {
		return fmt.Errorf("%s: %w", key, err)
	}
	p.out[key] = append(p.out[key], v)
	return nil
}

// value reads a value up to the end of its line, as git does: leading
// blanks dropped, trailing blanks dropped, quotes toggle, backslash escapes
// \n \t \b \\ \" and joins lines, an unquoted # or ; starts a comment.
func (p *configParser) value() (string, error) {
	var b strings.Builder
	quoted, space := false, 0
	for {
		c, ok := p.peek()
		if !ok {
			if quoted {
				return "", errors.New("unterminated quote")
			}
			return b.String(), nil
		}
		p.i++
		if c == '\n' {
			if quoted {
				return "", errors.New("unterminated quote")
			}
			p.line++
			return b.String(), nil
		}
		if !quoted && (c == '#' || c == ';') {
			p.skipLine()
			continue
		}
		if !quoted && (c == ' ' || c == '\t' || c == '\r') {
			if b.Len() > 0 {
				space++
			}
			continue
		}
		for ; space > 0; space-- {
			b.WriteByte(' ')
		}
		switch c {
		case '"':
			quoted = !quoted
		case '\\':
			e, ok := p.peek()
			if !ok {
				return "", errors.New("backslash at the end of the file")
			}
			p.i++
			switch e {
			case '\n':
				p.line++
			case 'n':
				b.WriteByte('\n')
			case 't':
				b.WriteByte('\t')
			case 'b':
				b.WriteByte('\b')
			case '\\', '"':
				b.WriteByte(e)
			default:
				return "", fmt.Errorf("bad escape \\%c", e)
			}
		default:
			b.WriteByte(c)
		}
	}
}
