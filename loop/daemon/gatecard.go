package daemon

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/loop/daemon/dashboard"
	"github.com/theloop-dev/theloop/workitem"
)

// A gate's card on the dashboard shows what changed in its artifacts since
// the last decision on it. graph-state.json keeps a gate's decision only
// until the gate is entered again (a changes-requested round trip clears
// it), and keeps hashes, not content. So loopd keeps its own copy, under
// the state root, taken when it records the decision and before the
// decision is saved (state before effects): per work item and gate the
// last decision (outcome, who, when, each artifact's SHA-256), and each
// artifact's bytes stored by their hash. The copy is an aid to the
// operator's eye, never a verdict: a failure to keep it is logged, and
// the decision stands.

// gateSnapshotsDir is the snapshots' directory under the state root.
const gateSnapshotsDir = "gate-snapshots"

// maxSnapshot bounds the bytes of one artifact kept (the card shows at
// most dashboard.MaxGateArtifact of it).
const maxSnapshot = dashboard.MaxGateArtifact

// gateSnapshots is the store: <dir>/<key>.json per work item and gate,
// <dir>/blobs/<sha256> per content.
type gateSnapshots struct{ dir string }

type gateSnapshot struct {
	Ref       string             `json:"ref"`
	Gate      string             `json:"gate"`
	Outcome   string             `json:"outcome"`
	By        string             `json:"by,omitempty"`
	At        string             `json:"at"`
	Artifacts []gateSnapshotFile `json:"artifacts"`
}

type gateSnapshotFile struct {
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
	// Kept is false when the content was not stored (too large).
	Kept bool `json:"kept"`
}

func (s gateSnapshots) key(ref, gate string) string {
	sum := sha256.Sum256([]byte(ref + "\x00" + gate))
	return hex.EncodeToString(sum[:16])
}

// save records a decision and its artifacts' content (read from arts).
func (s gateSnapshots) save(ref, gate string, d graph.Decision, arts fs.FS, names []string) error {
	snap := gateSnapshot{Ref: ref, Gate: gate, Outcome: d.Outcome, By: d.By, At: d.At}
	if err := os.MkdirAll(filepath.Join(s.dir, "blobs"), 0o700); err != nil {
		return err
	}
	var errs []error
	for _, name := range names {
		b, err := readBounded(arts, name, maxSnapshot)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil && !errors.Is(err, errTooLarge) {
			errs = append(errs, fmt.Errorf("%s: %w", name, err))
			continue
		}
		sum := sha256.Sum256(b)
		f := gateSnapshotFile{Name: name, SHA256: hex.EncodeToString(sum[:])}
		if err == nil {
			if werr := writeAtomic(filepath.Join(s.dir, "blobs", f.SHA256), b); werr != nil {
				errs = append(errs, werr)
			} else {
				f.Kept = true
			}
		}
		snap.Artifacts = append(snap.Artifacts, f)
	}
	js, err := json.MarshalIndent(snap, "", "  ")
	if err != nil {
		return err
	}
	if err := writeAtomic(filepath.Join(s.dir, s.key(ref, gate)+".json"), js); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// last returns the last decision kept for ref at gate (nil: none).
func (s gateSnapshots) last(ref, gate string) *gateSnapshot {
	b, err := os.ReadFile(filepath.Join(s.dir, s.key(ref, gate)+".json"))
	if err != nil {
		return nil
	}
	var snap gateSnapshot
	if json.Unmarshal(b, &snap) != nil || snap.Ref != ref || snap.Gate != gate {
		return nil
	}
	return &snap
}

// blob returns the content kept under sum, checked against it.
func (s gateSnapshots) blob(sum string) ([]byte, bool) {
	if len(sum) != 64 {
		return nil, false
	}
	if _, err := hex.DecodeString(sum); err != nil {
		return nil, false
	}
	b, err := os.ReadFile(filepath.Join(s.dir, "blobs", sum))
	if err != nil {
		return nil, false
	}
	got := sha256.Sum256(b)
	return b, hex.EncodeToString(got[:]) == sum
}

func writeAtomic(p string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(p), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), p)
}

var errTooLarge = errors.New("too large")

// readBounded reads at most limit bytes of name; a larger file returns
// its first limit bytes and errTooLarge. Only a regular file is read.
func readBounded(fsys fs.FS, name string, limit int) ([]byte, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("not a regular file (%s)", fi.Mode().Type())
	}
	b, err := io.ReadAll(io.LimitReader(f, int64(limit)+1))
	if err != nil {
		return nil, err
	}
	if len(b) > limit {
		return b[:limit], errTooLarge
	}
	return b, nil
}

// snapshotSigner keeps the gate's artifacts when loopd records a decision
// on a human gate, after the next signer (which may lock them) signed it.
type snapshotSigner struct {
	next   graph.DecisionSigner
	store  gateSnapshots
	record emitFunc
}

func (s snapshotSigner) SignDecision(ctx context.Context, sub graph.DecisionSubject, arts graph.Artifacts, gated []string, d *graph.Decision) error {
	var err error
	if s.next != nil {
		err = s.next.SignDecision(ctx, sub, arts, gated, d)
	}
	if d.Outcome == "" || len(d.Graph) > 0 {
		return err // a selection, not a gate verdict
	}
	names := append([]string(nil), gated...)
	if g, gerr := loop.ShippedGraph(sub.Loop); gerr == nil {
		for _, n := range dashboard.GateArtifactNames(g, sub.Gate) {
			if !slices.Contains(names, n) {
				names = append(names, n)
			}
		}
	}
	ref := sub.Ref
	if r, perr := workitem.Parse(sub.Ref); perr == nil {
		if c, cerr := r.Canonical(); cerr == nil {
			ref = c.String()
		}
	}
	if serr := s.store.save(ref, sub.Gate, *d, arts, names); serr != nil && s.record != nil {
		s.record("dashboard.gate_snapshot_failed", graph.LevelWarning, graph.Field{Key: "work_item", Value: sub.Ref}, graph.Field{Key: "node", Value: sub.Gate}, graph.Field{Key: "error", Value: serr.Error()})
	}
	return err
}

// GateCard implements dashboard.GateCards: the artifacts of the gate the
// work item waits at, read from its clone (confined to it: no link is
// followed out of it, only regular files are read, at most
// dashboard.MaxGateArtifact bytes), the content kept at the last decision
// on the gate, and loopd's own evaluation of the nodes leading to it.
func (s *dashSource) GateCard(ctx context.Context, ref string) (*dashboard.GateCard, error) {
	item, err := workitem.Parse(ref)
	if err != nil {
		return nil, dashboard.ErrNotFound
	}
	rec, err := s.d.reg.Get(item)
	if err != nil {
		return nil, nil
	}
	it, rt, g, st := s.item(ctx, rec)
	if g == nil || st == nil || !it.Human || it.State != dashboard.StateWaiting {
		return nil, nil
	}
	gate := st.CurrentNode
	id := item.SpecID()
	card := &dashboard.GateCard{Gate: gate}
	specDir := filepath.ToSlash(s.d.link.specDir(rec.Cwd))
	var root *os.Root
	if filepath.IsAbs(rec.Cwd) {
		root, err = os.OpenRoot(rec.Cwd)
		if err != nil {
			return nil, fmt.Errorf("opening the checkout %s: %w", rec.Cwd, err)
		}
		defer root.Close()
	}
	var prev *gateSnapshot
	if s.d.cfg.StateRoot != "" {
		canon := ref
		if c, err := item.Canonical(); err == nil {
			canon = c.String()
		}
		prev = gateSnapshots{dir: filepath.Join(s.d.cfg.StateRoot, gateSnapshotsDir)}.last(canon, gate)
	}
	if prev != nil {
		card.Previous = &dashboard.GateDecision{Outcome: prev.Outcome, By: prev.By, At: prev.At}
	}
	for _, name := range dashboard.GateArtifactNames(g, gate) {
		rel := path.Join(specDir, id, name)
		a := dashboard.GateArtifact{Name: name, Path: rel}
		switch {
		case root == nil || !filepath.IsLocal(filepath.FromSlash(rel)):
			a.Problem = "outside the checkout: not read"
		default:
			a.Content, a.Truncated, a.Problem = readArtifact(root, rel)
		}
		if a.Problem == "" {
			sum := sha256.Sum256(a.Content)
			a.SHA256 = hex.EncodeToString(sum[:])
		}
		if prev != nil {
			for _, f := range prev.Artifacts {
				if f.Name != name {
					continue
				}
				a.BeforeSHA256 = f.SHA256
				if f.Kept {
					a.Before, a.BeforeKnown = gateSnapshots{dir: filepath.Join(s.d.cfg.StateRoot, gateSnapshotsDir)}.blob(f.SHA256)
				}
			}
		}
		card.Artifacts = append(card.Artifacts, a)
	}
	var rep *graph.Report
	if rt != nil {
		rep, _ = rt.Status(ctx, id, false)
	}
	for _, p := range dashboard.GatePredecessors(g, gate) {
		n, _ := g.Node(p)
		c := dashboard.GateCheck{Node: p, Status: "not evaluated"}
		for _, h := range n.Exit {
			c.Hooks = append(c.Hooks, h.Name)
		}
		if _, skipped := st.Skips.Get(p); skipped || st.Record(p).Outcome == graph.OutcomeSkipped {
			c.Status = "skipped"
		} else if rep != nil {
			if nr, ok := rep.Node(p); ok {
				c.Status, c.Messages = string(nr.Status), nr.Messages
			}
		}
		card.Checks = append(card.Checks, c)
	}
	return card, nil
}

// readArtifact reads rel under root: a link is never followed (os.Root
// also refuses any path that would leave the checkout), only a regular
// file is read, without blocking (a FIFO planted as the artifact), at most
// dashboard.MaxGateArtifact bytes.
func readArtifact(root *os.Root, rel string) (content []byte, truncated bool, problem string) {
	name := filepath.FromSlash(rel)
	fi, err := root.Lstat(name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, false, "missing"
	case err != nil:
		return nil, false, "not readable: " + err.Error()
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, false, "a symbolic link: not followed"
	case !fi.Mode().IsRegular():
		return nil, false, "not a regular file: not read"
	}
	f, err := root.OpenFile(name, os.O_RDONLY|openNonBlock, 0)
	if err != nil {
		return nil, false, "not readable: " + err.Error()
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, false, "not a regular file: not read"
	}
	b, err := io.ReadAll(io.LimitReader(f, dashboard.MaxGateArtifact+1))
	if err != nil {
		return nil, false, "not readable: " + err.Error()
	}
	if len(b) > dashboard.MaxGateArtifact {
		return b[:dashboard.MaxGateArtifact], true, ""
	}
	return b, false, ""
}

var _ dashboard.GateCards = (*dashSource)(nil)
