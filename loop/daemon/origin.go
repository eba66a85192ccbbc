package daemon

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/theloop-dev/theloop/run"
)

// originCache remembers a checkout's origin URL (the graph link's
// repository-identity guard, docs/daemon.md §8.2) for as long as the files
// git read it from are unchanged, so the guard — three times per event on
// a work item at a gate — does not run git each time: a process start per
// guard was a fifth of a webhook's way to the agent's pane.
//
// An answer is kept only when git says the URL comes from the checkout's
// own configuration (the repository's config, or the worktree's
// config.worktree), neither of which includes other files, and it is
// checked before every use against those files and the checkout's .git
// entry (device, inode, size, modification and change time: the change
// time cannot be set back, so an edit is seen even when the modification
// time is restored). Settings in the user's or the system's configuration
// come before the repository's, so they cannot override a URL the
// repository sets. Anything else — a URL from an include or from the
// user's configuration, an unusual .git — is asked of git every time, as
// before.
type originCache struct {
	git run.Runner

	mu      sync.Mutex
	entries map[string]originEntry // by checkout
}

type originEntry struct {
	url    string
	stamps []fileStamp
}

// fileStamp is what a file's stat says about its content.
type fileStamp struct {
	path    string
	missing bool
	dev     uint64
	ino     uint64
	size    int64
	mtime   unix.Timespec
	ctime   unix.Timespec
}

func stampOf(path string) fileStamp {
	var st unix.Stat_t
	if err := unix.Stat(path, &st); err != nil {
		return fileStamp{path: path, missing: true}
	}
	return fileStamp{path: path, dev: uint64(st.Dev), ino: uint64(st.Ino), size: st.Size, mtime: st.Mtim, ctime: st.Ctim}
}

// originCacheMax bounds the checkouts remembered (one per live session).
const originCacheMax = 4096

func newOriginCache(git run.Runner) *originCache {
	return &originCache{git: git, entries: map[string]originEntry{}}
}

// url returns the checkout's remote.origin.url (trimmed).
func (c *originCache) url(ctx context.Context, cwd string) (string, error) {
	c.mu.Lock()
	e, ok := c.entries[cwd]
	c.mu.Unlock()
	if ok && e.fresh() {
		return e.url, nil
	}
	// Stamped before git reads them: an edit racing the read changes a
	// stamp and the next use asks again.
	stamps, files := checkoutConfigStamps(cwd)
	res, err := c.git.Run(ctx, run.Cmd{Name: "git", Args: []string{"-C", cwd, "config", "--show-origin", "--get", "remote.origin.url"}, Timeout: 10 * time.Second})
	if err != nil {
		return "", err
	}
	origin, url, _ := strings.Cut(strings.TrimSpace(string(res.Stdout)), "\t")
	url = strings.TrimSpace(url)
	if stamps != nil && fromOwnConfig(cwd, origin, files) {
		c.mu.Lock()
		if len(c.entries) >= originCacheMax {
			clear(c.entries)
		}
		c.entries[cwd] = originEntry{url: url, stamps: stamps}
		c.mu.Unlock()
	}
	return url, nil
}

func (e originEntry) fresh() bool {
	for _, s := range e.stamps {
		if stampOf(s.path) != s {
			return false
		}
	}
	return true
}

// checkoutConfigStamps stamps the files git reads a checkout's own
// configuration from: its .git entry, the worktree's commondir and
// config.worktree, and the repository's config. files are the two config
// files (repository, worktree). nil when the layout is not one it knows,
// or a config file includes others.
func checkoutConfigStamps(cwd string) (stamps []fileStamp, files []string) {
	dotgit := filepath.Join(cwd, ".git")
	fi, err := os.Stat(dotgit)
	if err != nil {
		return nil, nil
	}
	gitdir, common := dotgit, dotgit
	if !fi.IsDir() {
		// A linked worktree: ".git" is a file naming its git directory,
		// whose "commondir" names the repository's.
		b, err := os.ReadFile(dotgit)
		if err != nil {
			return nil, nil
		}
		p, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if !ok || strings.ContainsAny(p, "\n\r") {
			return nil, nil
		}
		if !filepath.IsAbs(p) {
			p = filepath.Join(cwd, p)
		}
		gitdir, common = p, p
		if b, err := os.ReadFile(filepath.Join(gitdir, "commondir")); err == nil {
			c := strings.TrimSpace(string(b))
			if !filepath.IsAbs(c) {
				c = filepath.Join(gitdir, c)
			}
			common = c
		}
	}
	files = []string{filepath.Join(common, "config"), filepath.Join(gitdir, "config.worktree")}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil && !os.IsNotExist(err) {
			return nil, nil
		}
		if bytes.Contains(bytes.ToLower(b), []byte("include")) {
			return nil, nil
		}
	}
	for _, p := range []string{dotgit, filepath.Join(gitdir, "commondir"), files[0], files[1]} {
		stamps = append(stamps, stampOf(p))
	}
	return stamps, files
}

// fromOwnConfig reports whether git's --show-origin ("file:<path>") names
// one of files.
func fromOwnConfig(cwd, origin string, files []string) bool {
	p, ok := strings.CutPrefix(origin, "file:")
	if !ok || p == "" {
		return false
	}
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	fi, err := os.Stat(p)
	if err != nil {
		return false
	}
	for _, f := range files {
		if gi, err := os.Stat(f); err == nil && os.SameFile(fi, gi) {
			return true
		}
	}
	return false
}
