package loop

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// LocalStatePatterns are what theloop writes into a checkout that is
// working state of this machine, never content: the lock beside every
// graph-state.json and the event log of a state root kept in the checkout.
// They go into the repository's .git/info/exclude — git's per-clone
// ignore list, which is not committed — so they never show as untracked
// in `git status` nor get committed by an agent's `git add -A`, and the
// repository's own .gitignore is left alone.
var LocalStatePatterns = []string{LockFileName, "/.the-loop/logs/"}

// maxExclude bounds the info/exclude read (it is a small text file; a
// huge one is left alone).
const maxExclude = 1 << 20

var excluded sync.Map // repo root → struct{}: done once per process

// excludeLocalState adds LocalStatePatterns to repoRoot's info/exclude
// once per process. It is best effort: a checkout that is not a git
// repository, an unusual layout or a write failure leaves things as they
// were. It writes only inside the repository's git directory — the one
// .git names (a directory, or a file "gitdir: …" for a worktree, whose
// info/ lives in the common directory) — and only to a regular file
// there, never through a symbolic link.
func excludeLocalState(repoRoot string) {
	if repoRoot == "" {
		return
	}
	if _, done := excluded.LoadOrStore(repoRoot, struct{}{}); done {
		return
	}
	gitDir, err := commonGitDir(repoRoot)
	if err != nil {
		return
	}
	_ = appendExcludes(filepath.Join(gitDir, "info", "exclude"), LocalStatePatterns)
}

// commonGitDir is the git directory holding repoRoot's info/exclude.
func commonGitDir(repoRoot string) (string, error) {
	dotGit := filepath.Join(repoRoot, ".git")
	fi, err := os.Lstat(dotGit)
	if err != nil {
		return "", err
	}
	dir := dotGit
	if fi.Mode().IsRegular() {
		b, err := readSmall(dotGit, 4096)
		if err != nil {
			return "", err
		}
		line, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
		if !ok || strings.ContainsAny(line, "\n\x00") {
			return "", errors.New("not a gitdir file")
		}
		if !filepath.IsAbs(line) {
			line = filepath.Join(repoRoot, line)
		}
		dir = line
		if b, err := readSmall(filepath.Join(dir, "commondir"), 4096); err == nil {
			c := strings.TrimSpace(string(b))
			if !filepath.IsAbs(c) {
				c = filepath.Join(dir, c)
			}
			dir = c
		}
	} else if !fi.IsDir() {
		return "", errors.New(".git is neither a directory nor a gitdir file")
	}
	// A git directory has a config and objects; anything else named by a
	// .git file is not one, and nothing is written there.
	if st, err := os.Stat(filepath.Join(dir, "objects")); err != nil || !st.IsDir() {
		return "", errors.New("not a git directory")
	}
	if _, err := os.Stat(filepath.Join(dir, "config")); err != nil {
		return "", errors.New("not a git directory")
	}
	return dir, nil
}

func readSmall(path string, max int64) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, max+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, errors.New("too large")
	}
	return b, nil
}

// appendExcludes appends the patterns path lacks, each on its own line.
func appendExcludes(path string, patterns []string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|oNoFollow, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() || fi.Size() > maxExclude {
		return errors.New("info/exclude is not a small regular file")
	}
	have, err := io.ReadAll(io.LimitReader(f, maxExclude))
	if err != nil {
		return err
	}
	lines := map[string]bool{}
	for _, l := range strings.Split(string(have), "\n") {
		lines[strings.TrimSpace(l)] = true
	}
	var add bytes.Buffer
	if len(have) > 0 && have[len(have)-1] != '\n' {
		add.WriteByte('\n')
	}
	missing := false
	for _, p := range patterns {
		if !lines[p] {
			add.WriteString(p + "\n")
			missing = true
		}
	}
	if !missing {
		return nil
	}
	if _, err := f.Seek(0, io.SeekEnd); err != nil {
		return err
	}
	_, err = f.Write(add.Bytes())
	return err
}
