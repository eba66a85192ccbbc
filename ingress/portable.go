package ingress

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/internal/atomicfile"
	"github.com/theloop-dev/theloop/workitem"
)

// Portable-record sections this package owns (docs/daemon.md §5.3, §3.4).
const (
	SectionControl = "control"
	SectionPoll    = "poll"
	// SectionGraph holds the phase selection loopd recorded (the frozen
	// graph), the trusted copy of what graph-state.json in the checkout
	// also holds.
	SectionGraph = "graph"
)

// TimeLayout is the UTC second-precision timestamp of state files.
const TimeLayout = "2006-01-02T15:04:05Z"

// maxRecordBytes bounds a portable record read from disk.
const maxRecordBytes = 4 << 20

// Control-record sources.
const (
	ControlFromComment = "comment"
	ControlFromCLI     = "cli"
)

// ErrCorruptRecord: a portable record could not be parsed. It was moved
// aside (<file>.corrupt-<unix time>) before anything new was written.
var ErrCorruptRecord = errors.New("ingress: corrupt portable record")

// ControlRecord is the durable control record of a work item (the control
// section of its portable record): the last control command applied.
type ControlRecord struct {
	Ref     string  `json:"ref"`
	Command Command `json:"command"`
	// Source is "comment" or "cli".
	Source string `json:"source"`
	Actor  string `json:"actor"`
	// RequestedAt is UTC, TimeLayout.
	RequestedAt string `json:"requestedAt"`
	// Note is the comment's URL when the command came from a comment.
	Note string `json:"note,omitempty"`
}

// PortableStore reads and writes work items' portable records,
// <state root>/portable/<slug>.json: {"ref", "url", then sections such as
// "control", "poll", "graph"}. Each write is a read-modify-write of one
// section, keeping every other section byte for byte, replaced atomically
// (internal/atomicfile, fsynced), so a record survives a crash or restart.
// Writes are serialised within the process; one daemon owns the state root
// (loopctl reaches it through the daemon's socket). A section set to null is
// a tombstone; a record left without any object section is deleted.
type PortableStore struct {
	dir   string
	clock graph.Clock
	mu    sync.Mutex
}

// NewPortableStore returns the store under stateRoot. Nothing is created
// until the first write.
func NewPortableStore(stateRoot string, clock graph.Clock) *PortableStore {
	if clock == nil {
		clock = graph.SystemClock{}
	}
	return &PortableStore{dir: filepath.Join(stateRoot, "portable"), clock: clock}
}

// Dir is the portable directory.
func (s *PortableStore) Dir() string { return s.dir }

// Path is the record file of ref.
func (s *PortableStore) Path(ref workitem.Ref) string {
	return filepath.Join(s.dir, ref.Slug()+".json")
}

// RecordControl writes ref's control section. The command must be one of
// Commands, the source comment or cli, and the actor named: a command needs
// someone to answer for it. RequestedAt defaults to now.
func (s *PortableStore) RecordControl(ref workitem.Ref, rec ControlRecord) error {
	if !rec.Command.Valid() {
		return fmt.Errorf("ingress: control record for %s: %q is not a control command", ref, clipText(string(rec.Command), 30))
	}
	if rec.Source != ControlFromComment && rec.Source != ControlFromCLI {
		return fmt.Errorf("ingress: control record for %s: source must be %q or %q, not %q", ref, ControlFromComment, ControlFromCLI, clipText(rec.Source, 30))
	}
	if strings.TrimSpace(rec.Actor) == "" {
		return fmt.Errorf("ingress: control record for %s: a command needs a named actor", ref)
	}
	rec.Ref = ref.String()
	if rec.RequestedAt == "" {
		rec.RequestedAt = s.clock.Now().UTC().Format(TimeLayout)
	}
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	return s.writeSection(ref, SectionControl, b)
}

// ClearControl writes the control tombstone (null).
func (s *PortableStore) ClearControl(ref workitem.Ref) error {
	return s.writeSection(ref, SectionControl, []byte("null"))
}

// Control returns ref's control record, nil when none (or a tombstone).
func (s *PortableStore) Control(ref workitem.Ref) (*ControlRecord, error) {
	raw, err := s.readSection(ref, SectionControl)
	if err != nil || raw == nil {
		return nil, err
	}
	var rec ControlRecord
	if err := json.Unmarshal(raw, &rec); err != nil {
		return nil, fmt.Errorf("%w: %s: the control section: %v", ErrCorruptRecord, s.Path(ref), err)
	}
	return &rec, nil
}

// StartRequested reports whether ref's last recorded command arms it
// (start, resume, contribute, do). An unreadable record is not a request.
func (s *PortableStore) StartRequested(ref workitem.Ref) (bool, error) {
	rec, err := s.Control(ref)
	if err != nil || rec == nil {
		return false, err
	}
	return rec.Command.Arms(), nil
}

// PollLedger is the poll section (docs/daemon.md §3.4).
type PollLedger struct {
	// SeenComments are the resolved comment keys, newest last, capped at
	// MaxSeenComments.
	SeenComments []string `json:"seenComments"`
	// CommentAttempts counts failed hand-offs per comment key.
	CommentAttempts map[string]int `json:"commentAttempts"`
	// CommentVersions is, per resolved comment key, the updated_at of the
	// version last resolved: a listing with another updated_at is an edit,
	// offered as a new change. A resolved key without a version (a ledger
	// written before versions were kept, or a listing without updated_at)
	// is baselined at the next sighting, never offered.
	CommentVersions map[string]string `json:"commentVersions,omitempty"`
	// Presence is the discovery event of the current sighting of the item.
	Presence PresenceState `json:"presence"`
	// LastPolledAt is UTC, TimeLayout.
	LastPolledAt string `json:"lastPolledAt,omitempty"`
}

// PresenceState tracks the one discovery event per sighting.
type PresenceState struct {
	DeliveryID string `json:"deliveryId,omitempty"`
	Kept       bool   `json:"kept,omitempty"`
	Attempts   int    `json:"attempts,omitempty"`
}

// MaxSeenComments caps PollLedger.SeenComments.
const MaxSeenComments = 2000

// Seen reports whether key is resolved.
func (l *PollLedger) Seen(key string) bool { return slices.Contains(l.SeenComments, key) }

// Resolve marks key seen and forgets its attempts.
func (l *PollLedger) Resolve(key string) {
	if !l.Seen(key) {
		l.SeenComments = append(l.SeenComments, key)
	}
	delete(l.CommentAttempts, key)
	if n := len(l.SeenComments) - MaxSeenComments; n > 0 {
		for _, k := range l.SeenComments[:n] {
			delete(l.CommentVersions, k)
		}
		l.SeenComments = append([]string(nil), l.SeenComments[n:]...)
	}
}

// ResolveVersion resolves key at version (GitHub's updated_at; "" records
// none, so the next sighting baselines it).
func (l *PollLedger) ResolveVersion(key, version string) {
	l.Resolve(key)
	if !l.Seen(key) {
		return // capped away at once
	}
	if version == "" {
		delete(l.CommentVersions, key)
		return
	}
	if l.CommentVersions == nil {
		l.CommentVersions = map[string]string{}
	}
	l.CommentVersions[key] = version
}

// Version is the updated_at key was last resolved at (ok false when none
// is recorded).
func (l *PollLedger) Version(key string) (version string, ok bool) {
	version, ok = l.CommentVersions[key]
	return version, ok
}

// Prune keeps only the keys of the live thread.
func (l *PollLedger) Prune(live map[string]bool) {
	kept := l.SeenComments[:0]
	for _, k := range l.SeenComments {
		if live[k] {
			kept = append(kept, k)
		}
	}
	l.SeenComments = kept
	for k := range l.CommentAttempts {
		if !live[k] {
			delete(l.CommentAttempts, k)
		}
	}
	for k := range l.CommentVersions {
		if !live[k] {
			delete(l.CommentVersions, k)
		}
	}
}

// PollLedger returns ref's ledger; nil when the item was never polled.
func (s *PortableStore) PollLedger(ref workitem.Ref) (*PollLedger, error) {
	raw, err := s.readSection(ref, SectionPoll)
	if err != nil || raw == nil {
		return nil, err
	}
	var l PollLedger
	if err := json.Unmarshal(raw, &l); err != nil {
		return nil, fmt.Errorf("%w: %s: the poll section: %v", ErrCorruptRecord, s.Path(ref), err)
	}
	if l.CommentAttempts == nil {
		l.CommentAttempts = map[string]int{}
	}
	return &l, nil
}

// SavePollLedger writes ref's poll section.
func (s *PortableStore) SavePollLedger(ref workitem.Ref, l *PollLedger) error {
	if l.SeenComments == nil {
		l.SeenComments = []string{}
	}
	if l.CommentAttempts == nil {
		l.CommentAttempts = map[string]int{}
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	return s.writeSection(ref, SectionPoll, b)
}

// DropPollLedger removes ref's poll section (tombstone), so a reopened item
// is seen for the first time again.
func (s *PortableStore) DropPollLedger(ref workitem.Ref) error {
	return s.writeSection(ref, SectionPoll, []byte("null"))
}

// SaveFrozenGraph writes ref's graph section: the frozen graph of the phase
// selection loopd recorded ({loop, workItem, surface, sessionPerPr, nodes}),
// kept outside the checkout so that an agent editing graph-state.json is
// found out. It must be a JSON object.
func (s *PortableStore) SaveFrozenGraph(ref workitem.Ref, frozen json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(frozen, &obj); err != nil || obj == nil {
		return fmt.Errorf("ingress: the frozen graph of %s is not a JSON object", ref)
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, frozen); err != nil {
		return fmt.Errorf("ingress: the frozen graph of %s: %w", ref, err)
	}
	return s.writeSection(ref, SectionGraph, buf.Bytes())
}

// FrozenGraph returns ref's graph section, nil when none was recorded.
func (s *PortableStore) FrozenGraph(ref workitem.Ref) (json.RawMessage, error) {
	return s.readSection(ref, SectionGraph)
}

// PolledRefs lists the refs whose record holds a poll section.
func (s *PortableStore) PolledRefs() ([]workitem.Ref, error) { return s.refsWith(SectionPoll) }

// ControlledRefs lists the refs whose record holds a control record (not a
// tombstone).
func (s *PortableStore) ControlledRefs() ([]workitem.Ref, error) { return s.refsWith(SectionControl) }

// refsWith lists the refs whose record holds section. Unreadable records
// are skipped.
func (s *PortableStore) refsWith(section string) ([]workitem.Ref, error) {
	entries, err := os.ReadDir(s.dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []workitem.Ref
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") || e.Name() == "index.json" {
			continue
		}
		rec, err := readRecord(filepath.Join(s.dir, e.Name()))
		if err != nil || rec == nil {
			continue
		}
		if raw := rec.get(section); raw == nil {
			continue
		}
		var ref string
		if json.Unmarshal(rec.get("ref"), &ref) != nil {
			continue
		}
		if r, err := workitem.Parse(ref); err == nil {
			out = append(out, r)
		}
	}
	return out, nil
}

// record is a decoded portable record: its keys in order with raw values.
type record struct {
	keys []string
	vals map[string]json.RawMessage
}

func (r *record) get(k string) json.RawMessage {
	v := r.vals[k]
	if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
		return nil
	}
	return v
}

func (r *record) set(k string, v json.RawMessage) {
	if _, ok := r.vals[k]; !ok {
		r.keys = append(r.keys, k)
	}
	r.vals[k] = v
}

// readRecord reads a record; nil, nil when the file does not exist.
func readRecord(path string) (*record, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxRecordBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxRecordBytes {
		return nil, fmt.Errorf("%w: %s is larger than %d bytes", ErrCorruptRecord, path, maxRecordBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	rec := &record{vals: map[string]json.RawMessage{}}
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, fmt.Errorf("%w: %s is not a JSON object", ErrCorruptRecord, path)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrCorruptRecord, path, err)
		}
		k, _ := t.(string)
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("%w: %s: key %q: %v", ErrCorruptRecord, path, clipText(k, 40), err)
		}
		rec.set(k, v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrCorruptRecord, path, err)
	}
	return rec, nil
}

func (s *PortableStore) readSection(ref workitem.Ref, section string) (json.RawMessage, error) {
	rec, err := readRecord(s.Path(ref))
	if err != nil || rec == nil {
		return nil, err
	}
	return rec.get(section), nil
}

// writeSection replaces one section of ref's record.
func (s *PortableStore) writeSection(ref workitem.Ref, section string, val json.RawMessage) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	path := s.Path(ref)
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("ingress: creating %s: %w", s.dir, err)
	}
	rec, err := readRecord(path)
	if err != nil {
		if !errors.Is(err, ErrCorruptRecord) {
			return err
		}
		// Keep the evidence, start afresh (nothing is deleted).
		aside := fmt.Sprintf("%s.corrupt-%d", path, s.clock.Now().Unix())
		if rerr := os.Rename(path, aside); rerr != nil {
			return fmt.Errorf("%w; moving it aside failed: %v", err, rerr)
		}
		rec = nil
	}
	if rec == nil {
		rec = &record{vals: map[string]json.RawMessage{}}
	}
	if stored, ok := rec.vals["ref"]; ok {
		var have string
		if json.Unmarshal(stored, &have) != nil || have != ref.String() {
			return fmt.Errorf("ingress: %s holds %s, not %s (two refs share a slug); refusing to overwrite it", path, clipText(have, 80), ref)
		}
	}
	refJSON, _ := json.Marshal(ref.String())
	rec.set("ref", refJSON)
	if ref.Provider == "github" && ref.Host == "" {
		u, _ := json.Marshal(fmt.Sprintf("https://github.com/%s/%s/issues/%d", ref.Owner, ref.Repo, ref.Number))
		rec.set("url", u)
	} else if ref.Provider == "github" {
		u, _ := json.Marshal(fmt.Sprintf("https://%s/%s/%s/issues/%d", ref.Host, ref.Owner, ref.Repo, ref.Number))
		rec.set("url", u)
	}
	rec.set(section, val)
	live := false
	for _, k := range rec.keys {
		if v := rec.get(k); len(v) > 0 && v[0] == '{' && k != "ref" && k != "url" {
			live = true
		}
	}
	if !live {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		return nil
	}
	return atomicfile.Write(path, rec.encode(), 0o600)
}

// encode renders the record pretty-printed (indent 2, trailing newline),
// ref and url first, the other keys in their stored order.
func (r *record) encode() []byte {
	var b bytes.Buffer
	b.WriteString("{\n")
	order := []string{"ref", "url"}
	for _, k := range r.keys {
		if k != "ref" && k != "url" {
			order = append(order, k)
		}
	}
	first := true
	for _, k := range order {
		v, ok := r.vals[k]
		if !ok {
			continue
		}
		if !first {
			b.WriteString(",\n")
		}
		first = false
		kj, _ := json.Marshal(k)
		b.WriteString("  ")
		b.Write(kj)
		b.WriteString(": ")
		var iv bytes.Buffer
		if json.Indent(&iv, v, "  ", "  ") != nil {
			b.Write(v)
		} else {
			b.Write(iv.Bytes())
		}
	}
	b.WriteString("\n}\n")
	return b.Bytes()
}

// now is the store's clock reading in TimeLayout.
func (s *PortableStore) now() string { return s.clock.Now().UTC().Format(TimeLayout) }
