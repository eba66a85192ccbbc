package sessions

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/internal/lazyre"
	"github.com/theloop-dev/theloop/workitem"
)

// Status is a session record's lifecycle state.
type Status string

// Record statuses. Active and paused records are live: at most one per work
// item.
const (
	StatusActive Status = "active"
	StatusPaused Status = "paused"
	StatusClosed Status = "closed"
)

// Live reports whether the status is active or paused.
func (s Status) Live() bool { return s == StatusActive || s == StatusPaused }

// TimeLayout is the UTC second-precision timestamp format of state files.
const TimeLayout = "2006-01-02T15:04:05Z"

// maxFallbacks bounds the fallback history kept in a record.
const maxFallbacks = 20

// Record is what the registry remembers about a work item's session.
type Record struct {
	// Item is the work item.
	Item workitem.Ref
	// Harness is the adapter name (a harness.Descriptor's).
	Harness string
	// SessionID is the harness's conversation id (--session-id/--resume).
	SessionID string
	// TmuxName is the tmux session (loop-<slug>).
	TmuxName string
	// Cwd is the absolute directory the harness runs in.
	Cwd string
	// Status is active, paused or closed.
	Status Status
	// Created is when the current conversation was started.
	Created time.Time
	// LastDelivery is when text was last delivered (zero: never).
	LastDelivery time.Time
	// Fallbacks records every respawn that could not resume the previous
	// conversation and started fresh, newest last.
	Fallbacks []Fallback
	// Parent is set on a pull request's own session (a PR endpoint,
	// docs/daemon.md §6.7): Item is the pull request and Parent the work item
	// it serves, whose record lists it in PullRequests. Zero for a work
	// item's session.
	Parent workitem.Ref
	// PullRequests are the pull requests linked to this work item
	// (session.pr_linked), oldest first. A linked PR's own session, when it
	// has one, is the record whose Item is the PR and Parent this work item.
	PullRequests []PRLink
}

// PRLink is a pull request linked to a work item's record.
type PRLink struct {
	// PR is the pull request's ref.
	PR workitem.Ref
	// Branch is its head branch, when an event has said ("" unknown).
	Branch string
	// Linked is when the link was recorded.
	Linked time.Time
	// Declined is why the PR has no session of its own, once decided
	// (no-separate-checkout, shared-worktree); "" otherwise.
	Declined string
	// Closed is set once the pull request was merged or closed.
	Closed bool
	// Fork: Branch is a fork's; the PR's code is refs/pull/<n>/head.
	Fork bool
}

// maxPRLinks bounds the pull requests one record lists.
const maxPRLinks = 100

// PR returns the link to pr, if the record has one.
func (r Record) PR(pr workitem.Ref) (PRLink, bool) {
	for _, l := range r.PullRequests {
		if l.PR == pr {
			return l, true
		}
	}
	return PRLink{}, false
}

// SetPR adds or replaces the link to l.PR and reports whether it was new.
func (r *Record) SetPR(l PRLink) bool {
	for i := range r.PullRequests {
		if r.PullRequests[i].PR == l.PR {
			r.PullRequests[i] = l
			return false
		}
	}
	r.PullRequests = append(r.PullRequests, l)
	return true
}

// Fallback records one fresh start after a failed resume.
type Fallback struct {
	// At is when it happened.
	At time.Time
	// PreviousSessionID is the conversation that could not be resumed.
	PreviousSessionID string
	// Reason says why resuming failed.
	Reason string
	// Artifacts are the work item's files (relative to Cwd) the fresh
	// session was told to read.
	Artifacts []string
}

// recordJSON is the file format: the reference's registry shape (docs/daemon.md §7.4),
// plus lastDeliveryAt and fallbacks.
type recordJSON struct {
	WorkItem struct {
		Ref      string `json:"ref"`
		Provider string `json:"provider"`
		Host     string `json:"host,omitempty"`
		Owner    string `json:"owner"`
		Repo     string `json:"repo"`
		Number   int    `json:"number"`
	} `json:"workItem"`
	Harness          string         `json:"harness"`
	HarnessSessionID string         `json:"harnessSessionId"`
	Cwd              string         `json:"cwd"`
	Status           Status         `json:"status"`
	CreatedAt        string         `json:"createdAt"`
	LastDeliveryAt   *string        `json:"lastDeliveryAt"`
	TmuxTarget       string         `json:"tmuxTarget"`
	URL              string         `json:"url,omitempty"`
	Fallbacks        []fallbackJSON `json:"fallbacks,omitempty"`
	Parent           *refJSON       `json:"parent,omitempty"`
	PullRequests     []prLinkJSON   `json:"pullRequests,omitempty"`
}

type refJSON struct {
	Ref string `json:"ref"`
}

type prLinkJSON struct {
	PullRequest refJSON `json:"pullRequest"`
	Branch      string  `json:"branch,omitempty"`
	LinkedAt    string  `json:"linkedAt"`
	Declined    string  `json:"declined,omitempty"`
	Closed      bool    `json:"closed,omitempty"`
	Fork        bool    `json:"fork,omitempty"`
}

type fallbackJSON struct {
	At                string   `json:"at"`
	PreviousSessionID string   `json:"previousSessionId"`
	Reason            string   `json:"reason"`
	Artifacts         []string `json:"artifacts"`
}

// MarshalJSON renders the record in the registry file format.
func (r Record) MarshalJSON() ([]byte, error) {
	var j recordJSON
	j.WorkItem.Ref = r.Item.String()
	j.WorkItem.Provider = r.Item.Provider
	j.WorkItem.Host = r.Item.Host
	j.WorkItem.Owner = r.Item.Owner
	j.WorkItem.Repo = r.Item.Repo
	j.WorkItem.Number = r.Item.Number
	j.Harness = r.Harness
	j.HarnessSessionID = r.SessionID
	j.Cwd = r.Cwd
	j.Status = r.Status
	j.CreatedAt = r.Created.UTC().Format(TimeLayout)
	if !r.LastDelivery.IsZero() {
		s := r.LastDelivery.UTC().Format(TimeLayout)
		j.LastDeliveryAt = &s
	}
	j.TmuxTarget = r.TmuxName
	j.URL = r.Item.URL()
	for _, f := range r.Fallbacks {
		arts := f.Artifacts
		if arts == nil {
			arts = []string{}
		}
		j.Fallbacks = append(j.Fallbacks, fallbackJSON{
			At: f.At.UTC().Format(TimeLayout), PreviousSessionID: f.PreviousSessionID,
			Reason: f.Reason, Artifacts: arts,
		})
	}
	if !r.Parent.IsZero() {
		j.Parent = &refJSON{Ref: r.Parent.String()}
	}
	for _, l := range r.PullRequests {
		j.PullRequests = append(j.PullRequests, prLinkJSON{PullRequest: refJSON{Ref: l.PR.String()}, Branch: l.Branch,
			LinkedAt: l.Linked.UTC().Format(TimeLayout), Declined: l.Declined, Closed: l.Closed, Fork: l.Fork})
	}
	return json.Marshal(j)
}

// ParseRecord parses and validates one registry file. Everything in it will
// reach argv or the filesystem, so every field is checked: the ref parses
// and agrees with the split-out fields, the session id has the resumable
// shape, the tmux name is the work item's own, the cwd is absolute, the
// status and timestamps are well-formed. Unknown keys are ignored.
func ParseRecord(data []byte) (Record, error) {
	var j recordJSON
	if err := json.Unmarshal(data, &j); err != nil {
		return Record{}, fmt.Errorf("%w: %v", ErrCorruptRecord, err)
	}
	bad := func(format string, args ...any) (Record, error) {
		return Record{}, fmt.Errorf("%w: "+format, append([]any{ErrCorruptRecord}, args...)...)
	}
	item, err := workitem.Parse(j.WorkItem.Ref)
	if err != nil {
		return bad("workItem.ref: %v", err)
	}
	if (j.WorkItem.Provider != "" && j.WorkItem.Provider != item.Provider) ||
		(j.WorkItem.Owner != "" && j.WorkItem.Owner != item.Owner) ||
		(j.WorkItem.Repo != "" && j.WorkItem.Repo != item.Repo) ||
		(j.WorkItem.Number != 0 && j.WorkItem.Number != item.Number) {
		return bad("workItem fields disagree with ref %q", j.WorkItem.Ref)
	}
	r := Record{Item: item, Harness: j.Harness, SessionID: j.HarnessSessionID, Cwd: j.Cwd, Status: j.Status}
	if !harnessNamePattern.MatchString(r.Harness) {
		return bad("harness %q", r.Harness)
	}
	if !ValidSessionID(r.SessionID) {
		return bad("harnessSessionId %q is not a valid session id", r.SessionID)
	}
	if !filepath.IsAbs(r.Cwd) || strings.ContainsRune(r.Cwd, 0) {
		return bad("cwd %q must be an absolute path", r.Cwd)
	}
	if !r.Status.Live() && r.Status != StatusClosed {
		return bad("status %q (want active, paused or closed)", r.Status)
	}
	// The stored name is sanitised on load (tmux would have rewritten it),
	// and must be the work item's own: a record cannot point theloop at
	// somebody else's session.
	r.TmuxName = SanitizeTmuxName(j.TmuxTarget)
	if r.TmuxName != TmuxName(item) {
		return bad("tmuxTarget %q is not %s's session %s", j.TmuxTarget, item, TmuxName(item))
	}
	if r.Created, err = time.Parse(TimeLayout, j.CreatedAt); err != nil {
		return bad("createdAt %q: want %s", j.CreatedAt, TimeLayout)
	}
	if j.LastDeliveryAt != nil {
		if r.LastDelivery, err = time.Parse(TimeLayout, *j.LastDeliveryAt); err != nil {
			return bad("lastDeliveryAt %q: want %s", *j.LastDeliveryAt, TimeLayout)
		}
	}
	for _, f := range j.Fallbacks {
		at, err := time.Parse(TimeLayout, f.At)
		if err != nil {
			return bad("fallbacks[].at %q: want %s", f.At, TimeLayout)
		}
		r.Fallbacks = append(r.Fallbacks, Fallback{At: at, PreviousSessionID: f.PreviousSessionID, Reason: f.Reason, Artifacts: f.Artifacts})
	}
	if j.Parent != nil {
		if r.Parent, err = workitem.Parse(j.Parent.Ref); err != nil {
			return bad("parent.ref: %v", err)
		}
		if r.Parent == item {
			return bad("parent %s is the record's own work item", j.Parent.Ref)
		}
	}
	if len(j.PullRequests) > maxPRLinks {
		return bad("pullRequests: %d links, at most %d", len(j.PullRequests), maxPRLinks)
	}
	for _, l := range j.PullRequests {
		pr, err := workitem.Parse(l.PullRequest.Ref)
		if err != nil {
			return bad("pullRequests[].pullRequest.ref: %v", err)
		}
		if l.Branch != "" {
			if err := ValidateBranch(l.Branch); err != nil {
				return bad("pullRequests[].branch: %v", err)
			}
		}
		at, err := time.Parse(TimeLayout, l.LinkedAt)
		if err != nil {
			return bad("pullRequests[].linkedAt %q: want %s", l.LinkedAt, TimeLayout)
		}
		switch l.Declined {
		case "", DeclinedNoSeparateCheckout, DeclinedSharedWorktree, DeclinedWorkspaceFailed:
		default:
			return bad("pullRequests[].declined %q", l.Declined)
		}
		r.PullRequests = append(r.PullRequests, PRLink{PR: pr, Branch: l.Branch, Linked: at, Declined: l.Declined, Closed: l.Closed, Fork: l.Fork})
	}
	return r, nil
}

// Reasons a pull request gets no session of its own
// (session.pr_session_declined, docs/daemon.md §6.7).
const (
	// DeclinedNoSeparateCheckout: no workspace is configured, or a
	// same-repository PR's head branch is unknown.
	DeclinedNoSeparateCheckout = "no-separate-checkout"
	// DeclinedSharedWorktree: the PR's checkout would be the work item's
	// own (its head branch is the branch the work item's session is on).
	DeclinedSharedWorktree = "shared-worktree"
	// DeclinedWorkspaceFailed: preparing the PR's checkout failed.
	DeclinedWorkspaceFailed = "workspace-failed"
)

// RegistryDir is where session records live under a state root.
func RegistryDir(stateRoot string) string { return filepath.Join(stateRoot, "sessions") }

// recordFilePattern is what List and lookups consider a record; other files
// may share the directory.
var recordFilePattern = lazyre.New(`^[A-Za-z0-9._-]+-[0-9]+\.json$`)

// harnessNamePattern is the shape of an adapter name (harness.Descriptor.Name).
var harnessNamePattern = lazyre.New(`^[a-z][a-z0-9-]{0,31}$`)

// Registry stores one record per work item as <dir>/<slug>.json. Writes are
// atomic (temp file, fsync, rename) and serialised across processes by a
// lock file in the directory; reads take no lock.
type Registry struct {
	dir string
}

// OpenRegistry opens (creating, mode 0700) the registry directory.
func OpenRegistry(dir string) (*Registry, error) {
	if dir == "" {
		return nil, errors.New("sessions.OpenRegistry: empty directory (use RegistryDir(stateRoot))")
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("creating session registry %s: %w", dir, err)
	}
	return &Registry{dir: dir}, nil
}

// Dir returns the registry directory.
func (r *Registry) Dir() string { return r.dir }

func (r *Registry) path(item workitem.Ref) string { return filepath.Join(r.dir, item.Slug()+".json") }

// Get returns the work item's record: ErrNoRecord if there is none,
// ErrCorruptRecord if the file does not parse, ErrSlugCollision if the file
// belongs to a different work item with the same slug.
func (r *Registry) Get(item workitem.Ref) (Record, error) {
	rec, _, err := r.get(item)
	return rec, err
}

// get is Get returning the record file's bytes too.
func (r *Registry) get(item workitem.Ref) (Record, []byte, error) {
	rec, data, err := readRecordData(r.path(item))
	if err != nil {
		return Record{}, nil, err
	}
	if rec.Item != item {
		return Record{}, nil, fmt.Errorf("%w: %s and %s both map to %s; rename one or close the other first", ErrSlugCollision, item, rec.Item, r.path(item))
	}
	return rec, data, nil
}

func readRecordData(path string) (Record, []byte, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Record{}, nil, fmt.Errorf("%w: %s", ErrNoRecord, path)
	}
	if err != nil {
		return Record{}, nil, fmt.Errorf("reading session record %s: %w", path, err)
	}
	rec, err := ParseRecord(data)
	if err != nil {
		return Record{}, nil, fmt.Errorf("%s: %w", path, err)
	}
	return rec, data, nil
}

// Put writes rec, replacing the work item's previous record. A file that
// belongs to another work item with the same slug is refused
// (ErrSlugCollision); an unparseable one is kept beside the new record as
// <slug>.json.corrupt-<timestamp>, never silently lost.
func (r *Registry) Put(ctx context.Context, rec Record) error {
	_, err := r.Update(ctx, rec.Item, func(old *Record, exists bool) error {
		*old = rec
		return nil
	})
	return err
}

// Update reads the work item's record, lets fn change it, validates the
// result and writes it atomically, all under the registry lock. exists
// tells fn whether there was a record; returning an error from fn writes
// nothing.
func (r *Registry) Update(ctx context.Context, item workitem.Ref, fn func(rec *Record, exists bool) error) (Record, error) {
	unlock, err := lockFile(ctx, filepath.Join(r.dir, ".registry.lock"))
	if err != nil {
		return Record{}, err
	}
	defer unlock()
	path := r.path(item)
	rec, cur, err := r.get(item)
	exists := err == nil
	switch {
	case exists, errors.Is(err, ErrNoRecord):
	case errors.Is(err, ErrCorruptRecord):
		aside := fmt.Sprintf("%s.corrupt-%s", path, time.Now().UTC().Format("20060102T150405Z"))
		if rerr := os.Rename(path, aside); rerr != nil {
			return Record{}, fmt.Errorf("moving corrupt record aside: %w", rerr)
		}
	default:
		return Record{}, err
	}
	if !exists {
		rec = Record{Item: item}
	}
	if err := fn(&rec, exists); err != nil {
		return Record{}, err
	}
	if rec.Item != item {
		return Record{}, fmt.Errorf("session record update changed the work item from %s to %s", item, rec.Item)
	}
	if len(rec.PullRequests) > maxPRLinks {
		rec.PullRequests = rec.PullRequests[len(rec.PullRequests)-maxPRLinks:]
	}
	if len(rec.Fallbacks) > maxFallbacks {
		rec.Fallbacks = rec.Fallbacks[len(rec.Fallbacks)-maxFallbacks:]
	}
	data, err := json.MarshalIndent(rec, "", "  ")
	if err != nil {
		return Record{}, err
	}
	// Write only what would read back: a record we could not load later is
	// a session we would lose track of.
	if _, err := ParseRecord(data); err != nil {
		return Record{}, fmt.Errorf("refusing to write session record for %s: %w", item, err)
	}
	data = append(data, '\n')
	if exists && bytes.Equal(data, cur) {
		// Nothing changed (a delivery stamped within the second of the
		// last one: the record keeps whole seconds): the file already
		// holds these bytes; rewriting them would cost two fsyncs.
		return rec, nil
	}
	if err := atomicfile.Write(path, data, 0o600); err != nil {
		return Record{}, err
	}
	return rec, nil
}

// Delete removes the work item's record (forget). A missing record is not an
// error.
func (r *Registry) Delete(ctx context.Context, item workitem.Ref) error {
	unlock, err := lockFile(ctx, filepath.Join(r.dir, ".registry.lock"))
	if err != nil {
		return err
	}
	defer unlock()
	if _, err := r.Get(item); errors.Is(err, ErrSlugCollision) {
		return err
	}
	if err := os.Remove(r.path(item)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("deleting session record: %w", err)
	}
	return nil
}

// List returns every readable record, sorted by work item. Files that do not
// parse are skipped and reported in the second result, so one bad file
// cannot hide the others.
func (r *Registry) List() ([]Record, []error) {
	return listRecords(r.dir, nil)
}

// ListRecords is List for a registry directory opened by nobody: it reads
// (and creates nothing), for a reader such as `loopctl events`.
func ListRecords(registryDir string) ([]Record, []error) {
	return listRecords(registryDir, nil)
}

func listRecords(dir string, keep func(data []byte) bool) ([]Record, []error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, []error{fmt.Errorf("listing session registry %s: %w", dir, err)}
	}
	var recs []Record
	var errs []error
	for _, e := range entries {
		if !e.Type().IsRegular() || !recordFilePattern.MatchString(e.Name()) {
			continue
		}
		path := filepath.Join(dir, e.Name())
		data, err := os.ReadFile(path)
		if err != nil {
			errs = append(errs, fmt.Errorf("reading %s: %w", path, err))
			continue
		}
		if keep != nil && !keep(data) {
			continue
		}
		rec, err := ParseRecord(data)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", path, err))
			continue
		}
		if e.Name() != rec.Item.Slug()+".json" {
			errs = append(errs, fmt.Errorf("%s: %w: holds %s, whose file would be %s.json", path, ErrCorruptRecord, rec.Item, rec.Item.Slug()))
			continue
		}
		recs = append(recs, rec)
	}
	sort.Slice(recs, func(i, j int) bool { return recs[i].Item.String() < recs[j].Item.String() })
	return recs, errs
}

// BySessionID finds the record whose harness session id is id.
func (r *Registry) BySessionID(id string) (Record, error) {
	return LookupBySessionID(r.dir, id)
}

// LookupBySessionID finds the record whose harness session id is sessionID
// in the registry directory, for loop-gate, which gets only the Stop
// payload's session_id. It reads files and nothing else — no tmux, no git,
// no lock, no directory creation — and parses only files that contain the
// id. A malformed id is refused before any file is read (ErrInvalidName);
// no match is ErrNoRecord. If more than one live record claims the id (it
// should never happen), it fails rather than guess.
func LookupBySessionID(registryDir, sessionID string) (Record, error) {
	if !ValidSessionID(sessionID) {
		return Record{}, fmt.Errorf("%w: session id %q", ErrInvalidName, sessionID)
	}
	needle := []byte(`"` + sessionID + `"`)
	recs, _ := listRecords(registryDir, func(data []byte) bool { return bytes.Contains(data, needle) })
	var found []Record
	for _, rec := range recs {
		if rec.SessionID == sessionID {
			found = append(found, rec)
		}
	}
	switch len(found) {
	case 0:
		return Record{}, fmt.Errorf("%w: no session %s in %s", ErrNoRecord, sessionID, registryDir)
	case 1:
		return found[0], nil
	default:
		return Record{}, fmt.Errorf("session id %s is claimed by %d records in %s (%s, %s, …); forget the stale ones with loopctl", sessionID, len(found), registryDir, found[0].Item, found[1].Item)
	}
}
