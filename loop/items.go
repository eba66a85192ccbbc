package loop

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/hooks"
	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/internal/lazyre"
	"github.com/theloop-dev/theloop/workitem"
)

var issueID = lazyre.New(`^issue-(\d+)$`)

// WorkItemRef derives a work item's provider-qualified ref: issue-<n> in a
// repository whose harness config names ticketing.github owner/repo becomes
// github:<owner>/<repo>#<n>; anything else stays the bare id.
func WorkItemRef(id, originRepo string) string {
	m := issueID.FindStringSubmatch(id)
	if m == nil {
		return id
	}
	n, err := strconv.Atoi(m[1])
	if err != nil || n <= 0 || n > workitem.MaxNumber {
		return id
	}
	owner, repo, ok := strings.Cut(originRepo, "/")
	if !ok || !workitem.ValidName(owner) || !workitem.ValidName(repo) {
		return id
	}
	return workitem.Ref{Provider: "github", Owner: owner, Repo: repo, Number: n}.String()
}

// JiraWorkItemRef is the ref of a work item tracked in Jira: an id that is
// an issue key of project (PROJ-123, ticketing.jira.project) becomes
// jira:PROJ-123; anything else "".
func JiraWorkItemRef(id, project string) string {
	if project == "" || !strings.HasPrefix(id, project+"-") {
		return ""
	}
	return workitem.JiraRef(id)
}

// fileItems resolves work items to spec directories on disk.
type fileItems struct {
	repoRoot    string // absolute
	specRoot    string // relative, slash-separated
	originRepo  string
	jiraProject string
	// refOverride is an inner loop's pull-request ref.
	refOverride string
	// scrub cleans the artifacts' log writes (Options.Scrub).
	scrub func(any) any
}

// Resolve implements graph.Items.
func (it *fileItems) Resolve(_ context.Context, id string) (graph.WorkItem, graph.Artifacts, error) {
	if err := ValidateWorkItemID(id); err != nil {
		return graph.WorkItem{}, nil, err
	}
	display := path.Join(it.specRoot, id)
	arts := NewFileArtifacts(filepath.Join(it.repoRoot, filepath.FromSlash(display)), display).Scrubbed(it.scrub)
	wi := graph.WorkItem{ID: id, Ref: WorkItemRef(id, it.originRepo), SpecDir: display, Tags: []string{}, RiskTier: 3}
	if ref := JiraWorkItemRef(id, it.jiraProject); ref != "" {
		wi.Ref = ref
	}
	if it.refOverride != "" {
		wi.Ref = it.refOverride
	}
	for _, name := range []string{"requirements.md", "bugfix.md", "design.md"} {
		if arts.specFacts(name, &wi) == nil {
			break
		}
	}
	return wi, arts, nil
}

// FileArtifacts is a spec directory on disk as graph.Artifacts. Names
// must be fs.ValidPath. Reads resolve beneath the checkout (the directory
// display names the spec directory below): the agent writes these files,
// and a symbolic link it plants — the file, or a directory on the way —
// must not make theloop, with its own rights, read what lies elsewhere on
// the host (loopd's keys, another item's checkout). Writes refuse any link
// on the way and are atomic replacements.
type FileArtifacts struct {
	dir     string
	display string
	// scrub, when set, cleans what is written to the running log (see
	// Scrubbed).
	scrub func(any) any
	// root is the checkout: dir without display's tail (dir itself when
	// display is not its tail); reads resolve beneath it (bn).
	root string
	bn   *beneath

	mu sync.Mutex
	// held is the specification Resolve read for its front matter, until
	// the first Lend of heldName takes it (or a write to it drops it).
	heldName string
	held     []byte
}

// take hands over the bytes Resolve kept for name, if it kept them.
func (a *FileArtifacts) take(name string) ([]byte, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.held == nil || name != a.heldName {
		return nil, false
	}
	data := a.held
	a.heldName, a.held = "", nil
	return data, true
}

// NewFileArtifacts returns the artifacts of the spec directory dir, shown in
// messages as display (e.g. "docs/specs/issue-7").
func NewFileArtifacts(dir, display string) *FileArtifacts {
	root := dir
	if d := filepath.FromSlash(display); d != "" && strings.HasSuffix(dir, string(filepath.Separator)+d) {
		root = strings.TrimSuffix(dir, string(filepath.Separator)+d)
	}
	return &FileArtifacts{dir: dir, display: display, root: root, bn: newBeneath(root)}
}

// Scrubbed makes a's log writes pass scrub (CredentialScrub, or loopd's
// scrubber) and returns a: every AppendFile (only the running logs are
// appended to: execution-log.md's checkpoints, decisions, test runs,
// force and skip entries) and every rewrite of execution-log.md (a
// critic's review). Those carry text a person or a program typed — a
// forced move's reason, a comment, a test's output — into a file that is
// committed and pushed; an artifact a gate signs is written as it is.
func (a *FileArtifacts) Scrubbed(scrub func(any) any) *FileArtifacts {
	a.scrub = scrub
	return a
}

// ScrubText is s cleaned by the scrubber Scrubbed gave (s itself when
// none): for a hook that writes a person's text into an artifact (a
// review comment recorded under ## Review comments).
func (a *FileArtifacts) ScrubText(s string) string {
	if a.scrub == nil {
		return s
	}
	if out, ok := a.scrub(s).(string); ok {
		return out
	}
	return s
}

// scrubbed is data as a log write may put it in the checkout.
func (a *FileArtifacts) scrubbed(data []byte) []byte {
	if a.scrub == nil {
		return data
	}
	return []byte(a.ScrubText(string(data)))
}

// rel is name's path relative to the checkout, for reads beneath it.
func (a *FileArtifacts) rel(op, name string) (string, error) {
	p, err := a.full(op, name)
	if err != nil {
		return "", err
	}
	r, err := filepath.Rel(a.root, p)
	if err != nil {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return r, nil
}

// openBeneath opens rel (relative to the checkout) read-only, without
// blocking, resolved beneath the checkout.
func (a *FileArtifacts) openBeneath(op, rel string) (*os.File, error) {
	f, err := openBeneathFile(a.bn, rel)
	if err != nil {
		return nil, &fs.PathError{Op: op, Path: filepath.Join(a.root, rel), Err: err}
	}
	return f, nil
}

func (a *FileArtifacts) full(op, name string) (string, error) {
	if !fs.ValidPath(name) || name == "." {
		return "", &fs.PathError{Op: op, Path: name, Err: fs.ErrInvalid}
	}
	return filepath.Join(a.dir, filepath.FromSlash(name)), nil
}

// Open implements fs.FS.
func (a *FileArtifacts) Open(name string) (fs.File, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "open", Path: name, Err: fs.ErrInvalid}
	}
	// Never block on a named pipe planted in the spec directory; a
	// directory is opened to be listed.
	f, err := a.openBeneath("open", filepath.Clean(filepath.Join(a.relDir(), filepath.FromSlash(name))))
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil || !(fi.Mode().IsRegular() || fi.IsDir()) {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: name, Err: errNotRegular}
	}
	return f, nil
}

// relDir is the spec directory relative to the checkout.
func (a *FileArtifacts) relDir() string {
	r, err := filepath.Rel(a.root, a.dir)
	if err != nil {
		return "."
	}
	return r
}

// ReadDir implements fs.ReadDirFS: the entries of a directory in the spec
// directory, sorted by name, as fs.ReadDir gives them through Open — in
// half the system calls (fs.Glob lists pr-loops/ on every check).
func (a *FileArtifacts) ReadDir(name string) ([]fs.DirEntry, error) {
	if !fs.ValidPath(name) {
		return nil, &fs.PathError{Op: "readdir", Path: name, Err: fs.ErrInvalid}
	}
	f, err := a.openBeneath("readdir", filepath.Clean(filepath.Join(a.relDir(), filepath.FromSlash(name))))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	entries, err := f.ReadDir(-1)
	slices.SortFunc(entries, func(x, y fs.DirEntry) int { return strings.Compare(x.Name(), y.Name()) })
	return entries, err
}

// MaxArtifactBytes bounds an artifact read into memory; a specification
// larger than this is not one, and the agent writes these files. It is the
// hooks' own bound, so both layers refuse the same size.
const MaxArtifactBytes = hooks.MaxArtifactBytes

// ReadFile implements fs.ReadFileFS (one syscall path, no directory walk).
// Files larger than MaxArtifactBytes are refused unread, with an
// *fs.PathError wrapping ErrTooLarge that gives the size and the cap.
func (a *FileArtifacts) ReadFile(name string) ([]byte, error) {
	rel, err := a.rel("read", name)
	if err != nil {
		return nil, err
	}
	data, err := readBeneathInto(a.bn, rel, MaxArtifactBytes, nil)
	if err != nil {
		return nil, readError(name, err)
	}
	return data, nil
}

// readError is ReadFile's error for name: a file over the cap is refused
// with an *fs.PathError wrapping ErrTooLarge that says what to do.
func readError(name string, err error) error {
	var tl *tooLargeError
	if errors.As(err, &tl) {
		// Hooks report the PathError's inner error beside the artifact's
		// path: say how large it is, what the cap is and what to do.
		size := "more than"
		if tl.size >= 0 {
			size = fmt.Sprintf("%d bytes, more than", tl.size)
		}
		return &fs.PathError{Op: "read", Path: name, Err: fmt.Errorf("%w: %s the %d bytes an artifact may have — shorten it (move bulk output such as logs out of the spec directory)", ErrTooLarge, size, MaxArtifactBytes)}
	}
	return err
}

// specFacts sets wi's tags and risk tier from the front matter of the
// artifact name (hooks.FrontMatter). It reads the file as a loan (Lend)
// and keeps it for the check that follows: that check's first Lend of the
// specification takes these bytes instead of reading the file again, so
// a `check --all` opens each specification once, not twice.
func (a *FileArtifacts) specFacts(name string, wi *graph.WorkItem) error {
	data, err := a.Lend(name)
	if err != nil {
		return err
	}
	// The front matter's strings share the loan until copied below.
	fm, _ := hooks.FrontMatter(unsafe.String(unsafe.SliceData(data), len(data)))
	if tags := graph.AsStrings(fm["tags"]); tags != nil {
		for i, t := range tags {
			tags[i] = strings.Clone(t)
		}
		wi.Tags = tags
	}
	if t := graph.Values(fm).Int("riskTier", 0); t > 0 {
		wi.RiskTier = t
	}
	a.mu.Lock()
	a.heldName, a.held = name, data
	a.mu.Unlock()
	return nil
}

// Stat implements fs.StatFS.
func (a *FileArtifacts) Stat(name string) (fs.FileInfo, error) {
	rel, err := a.rel("stat", name)
	if err != nil {
		return nil, err
	}
	// A stat tells metadata, never content (every read of content resolves
	// beneath the checkout), so one lstat answers for a file that is not a
	// link; a link is followed only beneath the checkout.
	fi, err := os.Lstat(filepath.Join(a.root, rel))
	if err != nil || fi.Mode()&fs.ModeSymlink == 0 {
		return fi, err
	}
	f, err := a.openBeneath("stat", rel)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Stat()
}

// WriteFile implements graph.Artifacts: temp file, fsync, rename. It
// refuses (ErrUnsafePath) to write through a symbolic link in the spec
// directory's path; a link in the file's own place is replaced, not
// followed.
func (a *FileArtifacts) WriteFile(name string, data []byte) error {
	p, err := a.full("write", name)
	if err != nil {
		return err
	}
	a.take(name)
	if err := a.safeDir(filepath.Dir(p)); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if path.Base(name) == hooks.ExecutionLog {
		data = a.scrubbed(data)
	}
	return atomicfile.Write(p, data, 0o644)
}

// AppendFile implements graph.Artifacts. The file is opened without
// following a symbolic link (O_APPEND would write wherever it points), and
// no directory on its path may be a link.
func (a *FileArtifacts) AppendFile(name string, data []byte) error {
	p, err := a.full("append", name)
	if err != nil {
		return err
	}
	a.take(name)
	if err := a.safeDir(filepath.Dir(p)); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_APPEND|os.O_CREATE|oNoFollow|oNonBlock, 0o644)
	if err != nil {
		if fi, lerr := os.Lstat(p); lerr == nil && fi.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s is a symbolic link; theloop appends only to files inside the checkout — replace the link with a file", ErrUnsafePath, a.Path(name))
		}
		return err
	}
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		f.Close()
		return fmt.Errorf("%w: %s is not a regular file", ErrUnsafePath, a.Path(name))
	}
	if _, err := f.Write(a.scrubbed(data)); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// safeDir checks that no existing directory from the repository root down
// to dir is a symbolic link (the spec tree is the agent's to write: a link
// must not make theloop write outside the checkout).
func (a *FileArtifacts) safeDir(dir string) error {
	root := a.root
	rel, err := filepath.Rel(root, dir)
	if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
		return fmt.Errorf("%w: %s is not under %s", ErrUnsafePath, dir, root)
	}
	cur := root
	for _, seg := range strings.Split(rel, string(filepath.Separator)) {
		if seg == "." {
			continue
		}
		cur = filepath.Join(cur, seg)
		info, err := os.Lstat(cur)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return fmt.Errorf("%w: %s is a symbolic link; theloop writes artifacts only inside the checkout — replace the link with a directory", ErrUnsafePath, cur)
		}
	}
	return nil
}

// Path implements graph.Artifacts.
func (a *FileArtifacts) Path(name string) string { return path.Join(a.display, name) }

var (
	_ graph.Artifacts = (*FileArtifacts)(nil)
	_ fs.ReadFileFS   = (*FileArtifacts)(nil)
	_ fs.StatFS       = (*FileArtifacts)(nil)
	_ fs.ReadDirFS    = (*FileArtifacts)(nil)
	_ graph.Items     = (*fileItems)(nil)
)
