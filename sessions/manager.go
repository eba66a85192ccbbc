package sessions

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/harness"
	"github.com/theloop-dev/theloop/workitem"
)

// ManagerConfig is the spawning policy.
type ManagerConfig struct {
	// DefaultHarness names the adapter used when a request names none
	// (default harness.Default()).
	DefaultHarness string
	// ResumeOnRespawn tries to reopen a dead session's conversation before
	// starting a fresh one.
	ResumeOnRespawn bool
	// ResumeProbe is how long a resumed harness must stay alive to count as
	// resumed (default 2 s). A harness that cannot find the conversation
	// exits well within it.
	ResumeProbe time.Duration
	// SpecDir is the artifact directory relative to the session's cwd
	// (the repository's workflow.specDir; default "docs/specs").
	SpecDir string
	// StateRoot is theloop's state root as an absolute path. Sessions get
	// it as THE_LOOP_STATE_ROOT, so loop-gate — which runs in the agent's
	// checkout, not the daemon's directory — finds the session registry.
	StateRoot string
	// Artifacts names the work item's artifact files (relative to its
	// spec directory, in reading order) a fresh session is pointed at;
	// those that exist are listed. The daemon derives them from the
	// graph's nodes' produces. Nil: every markdown file of the spec
	// directory, sorted by name.
	Artifacts func(rec Record) []string
	// Scrub, when set, is applied to every text pasted into a session
	// (prompts, assignments, excerpts of comments): the daemon's
	// credential scrubber, so that no token reaches the agent.
	Scrub func(string) string
}

// DefaultManagerConfig returns the defaults: claude, resume on, 2 s probe,
// docs/specs.
func DefaultManagerConfig() ManagerConfig {
	return ManagerConfig{DefaultHarness: harness.Default().Name, ResumeOnRespawn: true, ResumeProbe: 2 * time.Second, SpecDir: "docs/specs"}
}

// Observation is one thing the Manager did, for the daemon's event log.
// Event names follow the reference's vocabulary (session.spawned,
// session.respawned, session.resume_failed, session.respawn_averted,
// session.delivered, session.closed, workspace.trusted,
// workspace.trust_failed).
type Observation struct {
	Event     string
	Item      workitem.Ref
	SessionID string
	TmuxName  string
	// Detail holds event-specific fields (JSON-friendly values).
	Detail map[string]any
	// Err is set for failure events.
	Err error
}

// Observer receives observations. It is called synchronously from the
// Manager's goroutine and must not block or call back into the Manager.
type Observer interface{ Observe(Observation) }

// ObserverFunc adapts a function to Observer.
type ObserverFunc func(Observation)

// Observe implements Observer.
func (f ObserverFunc) Observe(o Observation) { f(o) }

// Deps are the Manager's collaborators. Tmux and Registry are required.
type Deps struct {
	Tmux      *Tmux
	Registry  *Registry
	Harnesses []Harness
	// LookPath resolves a harness binary to an absolute path (default
	// exec.LookPath). The resolved path is what tmux runs, since the tmux
	// server's PATH is whatever it started with.
	LookPath func(string) (string, error)
	// Now is the clock (default time.Now).
	Now func() time.Time
	// PrepareOutbox creates the outbox directory of a session (by the
	// harness's session id) and returns it; the confined harness may write
	// there and nowhere else under the state root. Nil: no outbox.
	PrepareOutbox func(sessionID string) (string, error)
	// NewSessionID mints conversation ids (default NewSessionID).
	NewSessionID func() (string, error)
	// Observer receives observations (default: none).
	Observer Observer
}

// Manager spawns, feeds and respawns work-item sessions. Calls for the same
// work item are serialised; different work items proceed in parallel.
type Manager struct {
	cfg       ManagerConfig
	tmux      *Tmux
	reg       *Registry
	harnesses map[string]Harness
	outbox    func(sessionID string) (string, error)
	lookPath  func(string) (string, error)
	now       func() time.Time
	newID     func() (string, error)
	observer  Observer

	mu    sync.Mutex
	items map[string]*sync.Mutex
	// registerMu orders registrations (Register's cross-item checks).
	registerMu sync.Mutex
}

// NewManager validates cfg and deps and returns a Manager.
func NewManager(cfg ManagerConfig, deps Deps) (*Manager, error) {
	d := DefaultManagerConfig()
	if cfg.DefaultHarness == "" {
		cfg.DefaultHarness = d.DefaultHarness
	}
	if cfg.ResumeProbe <= 0 {
		cfg.ResumeProbe = d.ResumeProbe
	}
	if cfg.SpecDir == "" {
		cfg.SpecDir = d.SpecDir
	}
	if filepath.IsAbs(cfg.SpecDir) || !filepath.IsLocal(cfg.SpecDir) {
		return nil, fmt.Errorf("manager config: SpecDir %q must be a relative path inside the checkout", cfg.SpecDir)
	}
	if deps.Tmux == nil || deps.Registry == nil {
		return nil, errors.New("sessions.NewManager: Tmux and Registry are required")
	}
	m := &Manager{
		cfg: cfg, tmux: deps.Tmux, reg: deps.Registry,
		harnesses: map[string]Harness{},
		outbox:    deps.PrepareOutbox,
		lookPath:  deps.LookPath, now: deps.Now, newID: deps.NewSessionID, observer: deps.Observer,
		items: map[string]*sync.Mutex{},
	}
	for _, h := range deps.Harnesses {
		if h == nil {
			return nil, errors.New("sessions.NewManager: nil harness adapter")
		}
		if _, dup := m.harnesses[h.Name()]; dup {
			return nil, fmt.Errorf("sessions.NewManager: harness %q registered twice", h.Name())
		}
		m.harnesses[h.Name()] = h
	}
	if _, ok := m.harnesses[cfg.DefaultHarness]; !ok {
		return nil, fmt.Errorf("manager config: default harness %q has no adapter (have %s)", cfg.DefaultHarness, strings.Join(m.harnessNames(), ", "))
	}
	if m.lookPath == nil {
		m.lookPath = exec.LookPath
	}
	if m.now == nil {
		m.now = time.Now
	}
	if m.newID == nil {
		m.newID = NewSessionID
	}
	if m.observer == nil {
		m.observer = ObserverFunc(func(Observation) {})
	}
	return m, nil
}

func (m *Manager) harnessNames() []string {
	var names []string
	for n := range m.harnesses {
		names = append(names, n)
	}
	return names
}

// lockItem serialises work on one work item within this process.
func (m *Manager) lockItem(item workitem.Ref) func() {
	m.mu.Lock()
	l, ok := m.items[item.Slug()]
	if !ok {
		l = &sync.Mutex{}
		m.items[item.Slug()] = l
	}
	m.mu.Unlock()
	l.Lock()
	return l.Unlock
}

func (m *Manager) stamp() time.Time { return m.now().UTC().Truncate(time.Second) }

// harness resolves an adapter and the absolute path of its binary.
func (m *Manager) harness(name string) (Harness, string, error) {
	if name == "" {
		name = m.cfg.DefaultHarness
	}
	h, ok := m.harnesses[name]
	if !ok {
		return nil, "", fmt.Errorf("%w %q (have %s)", ErrUnknownHarness, name, strings.Join(m.harnessNames(), ", "))
	}
	bin, err := m.lookPath(h.Binary())
	if err != nil {
		return nil, "", fmt.Errorf("%w: %s (%v); install it or put it on the daemon's PATH", ErrHarnessNotFound, h.Binary(), err)
	}
	return h, bin, nil
}

// sessionEnv is the environment every spawned session gets: loop-gate reads
// THE_LOOP_WORK_ITEM to find what to check (and THE_LOOP_STATE_ROOT to find
// the registry).
func sessionEnv(item workitem.Ref, sessionID, stateRoot string) []string {
	return endpointEnv(item, workitem.Ref{}, sessionID, stateRoot)
}

// endpointEnv is sessionEnv for a record that may be a pull request's own
// session: its work item is the parent, and THE_LOOP_PR names the PR.
func endpointEnv(item, parent workitem.Ref, sessionID, stateRoot string) []string {
	owner := item
	if !parent.IsZero() {
		owner = parent
	}
	env := []string{
		"THE_LOOP_WORK_ITEM=" + owner.WorkItemEnv(),
		"THE_LOOP_WORK_ITEM_REF=" + owner.String(),
		"THE_LOOP_SESSION_ID=" + sessionID,
	}
	if !parent.IsZero() {
		env = append(env, "THE_LOOP_PR="+strconv.Itoa(item.Number), "THE_LOOP_PR_REF="+item.String())
	}
	if stateRoot != "" {
		env = append(env, "THE_LOOP_STATE_ROOT="+stateRoot)
	}
	return env
}

func (m *Manager) prepareEnvironment(h Harness, item workitem.Ref, cwd string) {
	p, err := h.PrepareEnvironment(cwd)
	if err != nil {
		m.observer.Observe(Observation{Event: "workspace.trust_failed", Item: item, Err: err, Detail: map[string]any{"cwd": cwd}})
		return
	}
	if len(p.Changed) > 0 || len(p.Trusted) > 0 {
		m.observer.Observe(Observation{Event: "workspace.trusted", Item: item, Detail: map[string]any{"cwd": cwd, "trusted": p.Trusted, "changed": p.Changed}})
	}
	for _, w := range p.Warnings {
		m.observer.Observe(Observation{Event: "workspace.warning", Item: item, Detail: map[string]any{"cwd": cwd, "warning": w}})
	}
}

// SpawnRequest asks for a new session.
type SpawnRequest struct {
	// Item is the work item.
	Item workitem.Ref
	// Harness names the adapter ("" = the default).
	Harness string
	// Cwd is the absolute directory to run in (the prepared worktree).
	Cwd string
	// Prompt is the first message, pasted once the harness is ready ("" =
	// none). It never goes on the command line.
	Prompt string
	// Parent makes the session a pull request's own (Item is the PR): the
	// work item it serves (see Record.Parent).
	Parent workitem.Ref
}

// SpawnResult is a spawned session.
type SpawnResult struct {
	Record Record
	// Receipt is the first delivery's receipt (zero when no prompt).
	Receipt Receipt
}

// Spawn starts a new conversation for the work item in a new tmux session.
// It refuses, changing nothing, when a live (or unknown) session holds the
// work item's name — deliver into it instead. The record (with the
// pre-assigned session id) is written before tmux runs; if the spawn fails
// the previous record is restored.
//
// Spawn returns once the harness has drawn a steady screen (and, with a
// prompt, once the prompt's receipt is in). If the harness dies at start-up
// or the prompt cannot be delivered, the error is returned with the record
// and whatever is left of the session stays for an operator to inspect.
func (m *Manager) Spawn(ctx context.Context, req SpawnRequest) (SpawnResult, error) {
	if req.Item.IsZero() {
		return SpawnResult{}, fmt.Errorf("%w: spawn without a work item", workitem.ErrInvalid)
	}
	defer m.lockItem(req.Item)()
	h, bin, err := m.harness(req.Harness)
	if err != nil {
		return SpawnResult{}, err
	}
	name := TmuxName(req.Item)
	prev, err := m.reg.Get(req.Item)
	hadPrev := err == nil
	if err != nil && !errors.Is(err, ErrNoRecord) && !errors.Is(err, ErrCorruptRecord) {
		return SpawnResult{}, err
	}
	switch l, perr := m.tmux.Probe(ctx, name); l {
	case LivenessLive:
		return SpawnResult{}, fmt.Errorf("%w: %s already has session %s; deliver into it instead", ErrSessionLive, req.Item, name)
	case LivenessUnknown:
		return SpawnResult{}, fmt.Errorf("%w: %s: %v", ErrSessionUnknown, name, perr)
	}
	id, err := m.newID()
	if err != nil {
		return SpawnResult{}, err
	}
	args, err := h.Interactive(id)
	if err != nil {
		return SpawnResult{}, err
	}
	m.prepareEnvironment(h, req.Item, req.Cwd)

	rec, err := m.reg.Update(ctx, req.Item, func(r *Record, _ bool) error {
		*r = Record{Item: req.Item, Harness: h.Name(), SessionID: id, TmuxName: name, Cwd: req.Cwd,
			Status: StatusActive, Created: m.stamp(), Fallbacks: r.Fallbacks, Parent: req.Parent, PullRequests: r.PullRequests}
		return nil
	})
	if err != nil {
		return SpawnResult{}, err
	}
	spec := SpawnSpec{Name: name, Cwd: req.Cwd, Env: endpointEnv(req.Item, req.Parent, id, m.cfg.StateRoot), Argv: append([]string{bin}, args...), RegistryFile: m.reg.path(req.Item)}
	if err := m.spawn(ctx, spec, id); err != nil {
		// Do not leave a record pointing at a conversation that never began.
		if hadPrev {
			_ = m.reg.Put(ctx, prev)
		} else {
			_ = m.reg.Delete(ctx, req.Item)
		}
		return SpawnResult{}, err
	}
	m.observer.Observe(Observation{Event: "session.spawned", Item: req.Item, SessionID: id, TmuxName: name,
		Detail: map[string]any{"harness": h.Name(), "cwd": req.Cwd, "runner": "tmux"}})
	res := SpawnResult{Record: rec}
	if req.Prompt == "" {
		// Still wait for the harness to come up, so one that dies at start
		// (bad arguments, no credentials) is reported here.
		return res, m.tmux.WaitReady(ctx, name)
	}
	res.Record, res.Receipt, err = m.deliverReady(ctx, rec, req.Prompt)
	return res, err
}

// deliverReady waits for a fresh harness to be ready, then delivers.
func (m *Manager) deliverReady(ctx context.Context, rec Record, text string) (Record, Receipt, error) {
	if err := m.tmux.WaitReady(ctx, rec.TmuxName); err != nil {
		return rec, Receipt{}, err
	}
	return m.deliverLive(ctx, rec, text)
}

// deliverLive pastes into the session and records the delivery time.
func (m *Manager) deliverLive(ctx context.Context, rec Record, text string) (Record, Receipt, error) {
	if m.cfg.Scrub != nil {
		text = m.cfg.Scrub(text)
	}
	var gap time.Duration
	name := rec.Harness
	if name == "" {
		name = m.cfg.DefaultHarness
	}
	if h, ok := m.harnesses[name]; ok {
		gap = submitGap(h)
	}
	r, err := m.tmux.DeliverWith(ctx, rec.TmuxName, text, gap)
	if err != nil {
		return rec, r, err
	}
	updated, uerr := m.reg.Update(ctx, rec.Item, func(cur *Record, exists bool) error {
		if !exists || cur.SessionID != rec.SessionID {
			return errors.New("record changed underneath")
		}
		cur.LastDelivery = m.stamp()
		return nil
	})
	if uerr == nil {
		rec = updated
	}
	m.observer.Observe(Observation{Event: "session.delivered", Item: rec.Item, SessionID: rec.SessionID, TmuxName: rec.TmuxName,
		Detail: map[string]any{"bytes": r.Bytes, "seen": r.Seen, "changed": r.Changed}, Err: uerr})
	return rec, r, nil
}

// DeliveryResult is the outcome of Deliver.
type DeliveryResult struct {
	Record  Record
	Receipt Receipt
	// Respawn is set when the session had died and was brought back first.
	Respawn *RespawnResult
}

// Deliver pastes text into the work item's session. A live session — or
// one whose state is unknown, which is never assumed gone — gets the paste.
// A dead or absent one is respawned (see Respawn) with text as its first
// message. A work item without a record is ErrNoRecord (spawn it); a
// closed one is ErrSessionClosed.
func (m *Manager) Deliver(ctx context.Context, item workitem.Ref, text string) (DeliveryResult, error) {
	defer m.lockItem(item)()
	rec, err := m.reg.Get(item)
	if err != nil {
		return DeliveryResult{}, fmt.Errorf("delivering to %s: %w (spawn a session first)", item, err)
	}
	if rec.Status == StatusClosed {
		return DeliveryResult{Record: rec}, fmt.Errorf("%w: %s; start it again to deliver", ErrSessionClosed, item)
	}
	// No probe first: the delivery itself finds a dead pane (its paste
	// guard) or an absent session (its capture) and says ErrSessionMissing
	// before anything is pasted — one round trip to tmux less per event.
	updated, receipt, err := m.deliverLive(ctx, rec, text)
	if !errors.Is(err, ErrSessionMissing) {
		return DeliveryResult{Record: updated, Receipt: receipt}, err
	}
	// The harness is gone (or went while we pasted): respawn.
	rr, err := m.respawn(ctx, rec, text)
	return DeliveryResult{Record: rr.Record, Receipt: rr.Receipt, Respawn: &rr}, err
}

// RespawnResult is the outcome of Respawn.
type RespawnResult struct {
	Record  Record
	Receipt Receipt
	// Averted: the session turned out to be live; nothing was spawned and
	// the prompt went into the running session.
	Averted bool
	// Resumed: the previous conversation was reopened.
	Resumed bool
	// Fallback is set when a fresh conversation replaced one that could not
	// be resumed (it is also appended to the record).
	Fallback *Fallback
}

// Respawn brings back a work item's dead session and delivers prompt as its
// first message. It never kills or replaces a live session (the prompt is
// delivered into it instead, Averted) and never spawns over one whose state
// is unknown (ErrSessionUnknown). It first tries to resume the recorded
// conversation in the recorded cwd and requires the harness to stay alive
// for ResumeProbe; otherwise it starts a fresh conversation seeded with the
// work item's artifacts and records the fallback.
func (m *Manager) Respawn(ctx context.Context, item workitem.Ref, prompt string) (RespawnResult, error) {
	defer m.lockItem(item)()
	rec, err := m.reg.Get(item)
	if err != nil {
		return RespawnResult{}, fmt.Errorf("respawning %s: %w", item, err)
	}
	if rec.Status == StatusClosed {
		return RespawnResult{Record: rec}, fmt.Errorf("%w: %s", ErrSessionClosed, item)
	}
	return m.respawn(ctx, rec, prompt)
}

func (m *Manager) respawn(ctx context.Context, rec Record, prompt string) (RespawnResult, error) {
	res := RespawnResult{Record: rec}
	switch l, perr := m.tmux.Probe(ctx, rec.TmuxName); l {
	case LivenessLive:
		m.observer.Observe(Observation{Event: "session.respawn_averted", Item: rec.Item, SessionID: rec.SessionID, TmuxName: rec.TmuxName})
		res.Averted = true
		if prompt == "" {
			return res, nil
		}
		var err error
		res.Record, res.Receipt, err = m.deliverLive(ctx, rec, prompt)
		return res, err
	case LivenessUnknown:
		return res, fmt.Errorf("%w: %s: %v; not respawning over it", ErrSessionUnknown, rec.TmuxName, perr)
	}
	h, bin, err := m.harness(rec.Harness)
	if err != nil {
		return res, err
	}
	if fi, err := os.Stat(rec.Cwd); err != nil || !fi.IsDir() {
		return res, fmt.Errorf("%w: %s for %s; prepare its workspace again and spawn", ErrCwdMissing, rec.Cwd, rec.Item)
	}
	m.prepareEnvironment(h, rec.Item, rec.Cwd)

	reason, err := m.tryResume(ctx, h, bin, rec)
	if err != nil {
		return res, err
	}
	if reason == "" {
		// Any doubt means a fresh conversation: a resumed harness that dies
		// before it is ready would otherwise fail every delivery, forever.
		if err := m.tmux.WaitReady(ctx, rec.TmuxName); errors.Is(err, ErrSessionMissing) {
			reason = "the harness exited while starting the resumed conversation"
		} else if err != nil {
			return res, err
		}
	}
	if reason == "" {
		res.Resumed = true
		m.observer.Observe(Observation{Event: "session.respawned", Item: rec.Item, SessionID: rec.SessionID, TmuxName: rec.TmuxName, Detail: map[string]any{"resumed": true}})
		if prompt == "" {
			return res, nil
		}
		res.Record, res.Receipt, err = m.deliverLive(ctx, rec, prompt)
		return res, err
	}

	m.observer.Observe(Observation{Event: "session.resume_failed", Item: rec.Item, SessionID: rec.SessionID, TmuxName: rec.TmuxName, Detail: map[string]any{"reason": reason}})
	id, err := m.newID()
	if err != nil {
		return res, err
	}
	args, err := h.Interactive(id)
	if err != nil {
		return res, err
	}
	// The new id is recorded before the spawn. If the spawn then fails, the
	// next delivery finds no session, cannot resume the id (it never ran)
	// and falls back again: it heals, at the cost of one extra fallback
	// entry.
	fb := Fallback{At: m.stamp(), PreviousSessionID: rec.SessionID, Reason: reason, Artifacts: m.artifacts(rec)}
	rec, err = m.reg.Update(ctx, rec.Item, func(r *Record, _ bool) error {
		r.SessionID, r.Created, r.Status = id, fb.At, StatusActive
		r.Fallbacks = append(r.Fallbacks, fb)
		return nil
	})
	if err != nil {
		return res, err
	}
	res.Record, res.Fallback = rec, &fb
	spec := SpawnSpec{Name: rec.TmuxName, Cwd: rec.Cwd, Env: endpointEnv(rec.Item, rec.Parent, id, m.cfg.StateRoot), Argv: append([]string{bin}, args...), RegistryFile: m.reg.path(rec.Item)}
	if err := m.spawn(ctx, spec, id); err != nil {
		return res, err
	}
	m.observer.Observe(Observation{Event: "session.respawned", Item: rec.Item, SessionID: id, TmuxName: rec.TmuxName,
		Detail: map[string]any{"resumed": false, "previousSessionId": fb.PreviousSessionID, "artifacts": fb.Artifacts}})
	res.Record, res.Receipt, err = m.deliverReady(ctx, rec, seedPrompt(rec.Item, fb, m.specDir(rec.Item), prompt))
	return res, err
}

// tryResume reopens rec's conversation and verifies it stays alive. It
// returns "" on success, otherwise the reason resuming was given up (a
// fixed phrase safe to show the next session). It returns an error only
// when the name became unusable (live or unknown), in which case nothing
// else may be spawned either.
func (m *Manager) tryResume(ctx context.Context, h Harness, bin string, rec Record) (string, error) {
	if !m.cfg.ResumeOnRespawn {
		return "resuming is turned off", nil
	}
	if !ValidSessionID(rec.SessionID) {
		return "the recorded session id cannot be resumed", nil
	}
	args, err := h.Resume(rec.SessionID)
	if err != nil {
		return "the harness cannot resume sessions", nil
	}
	spec := SpawnSpec{Name: rec.TmuxName, Cwd: rec.Cwd, Env: endpointEnv(rec.Item, rec.Parent, rec.SessionID, m.cfg.StateRoot), Argv: append([]string{bin}, args...), RegistryFile: m.reg.path(rec.Item)}
	if err := m.spawn(ctx, spec, rec.SessionID); err != nil {
		if errors.Is(err, ErrSessionLive) || errors.Is(err, ErrSessionUnknown) || errors.Is(err, ErrSessionOccupied) {
			return "", err
		}
		return "tmux could not start the resumed harness", nil
	}
	deadline := time.Now().Add(m.cfg.ResumeProbe)
	for {
		l, perr := m.tmux.Probe(ctx, rec.TmuxName)
		switch l {
		case LivenessDead, LivenessAbsent:
			return fmt.Sprintf("the harness exited within %s of resuming", m.cfg.ResumeProbe), nil
		case LivenessUnknown:
			return "", fmt.Errorf("%w: %s after resuming: %v", ErrSessionUnknown, rec.TmuxName, perr)
		}
		if time.Now().After(deadline) {
			return "", nil
		}
		if err := sleepCtx(ctx, m.tmux.cfg.PollInterval); err != nil {
			return "", err
		}
	}
}

// spawn starts spec in tmux, after preparing the session's outbox (the one
// place under the state root its confined harness may write).
func (m *Manager) spawn(ctx context.Context, spec SpawnSpec, sessionID string) error {
	if m.outbox != nil {
		dir, err := m.outbox(sessionID)
		if err != nil {
			return fmt.Errorf("preparing the outbox of session %s: %w", sessionID, err)
		}
		spec.OutboxDir = dir
	}
	return m.tmux.Spawn(ctx, spec)
}

func (m *Manager) specDir(item workitem.Ref) string {
	if item.SpecID() == "" {
		return ""
	}
	return filepath.Join(m.cfg.SpecDir, item.SpecID())
}

// artifacts lists the work item's artifact files that exist under rec.Cwd,
// relative to it: ManagerConfig.Artifacts' names, or every markdown file of
// the spec directory. None is a link or outside the spec directory.
func (m *Manager) artifacts(rec Record) []string {
	dir := m.specDir(rec.Item)
	if dir == "" {
		return nil
	}
	var names []string
	if m.cfg.Artifacts != nil {
		names = m.cfg.Artifacts(rec)
	} else if entries, err := os.ReadDir(filepath.Join(rec.Cwd, dir)); err == nil {
		for _, e := range entries {
			if strings.HasSuffix(e.Name(), ".md") {
				names = append(names, e.Name())
			}
		}
	}
	var found []string
	seen := map[string]bool{}
	for _, name := range names {
		if !filepath.IsLocal(name) || seen[name] {
			continue
		}
		seen[name] = true
		rel := filepath.Join(dir, name)
		if fi, err := os.Lstat(filepath.Join(rec.Cwd, rel)); err == nil && fi.Mode().IsRegular() {
			found = append(found, rel)
		}
	}
	return found
}

// seedPrompt is the first message of a fresh conversation that replaces a
// lost one. It names the artifacts rather than pasting them: they are files
// the agent can read, and some hold text written by people outside, which
// must reach the agent as data, not as the daemon's instructions.
func seedPrompt(item workitem.Ref, fb Fallback, specDir, prompt string) string {
	return seedPromptWith(fmt.Sprintf("theloop: your previous conversation on %s could not be resumed (%s), so this is a fresh session.\n", item, fb.Reason), fb, specDir, prompt)
}

// seedPromptWith is seedPrompt with its own opening line.
func seedPromptWith(opening string, fb Fallback, specDir, prompt string) string {
	var b strings.Builder
	b.WriteString(opening)
	switch {
	case len(fb.Artifacts) > 0:
		b.WriteString("Before anything else, read these files: they are the work item's record so far.\n")
		for _, a := range fb.Artifacts {
			b.WriteString("- " + a + "\n")
		}
	case specDir != "":
		fmt.Fprintf(&b, "There are no artifacts under %s yet; start from the work item itself.\n", specDir)
	default:
		b.WriteString("There are no artifacts for this work item; start from the work item itself.\n")
	}
	if strings.TrimSpace(prompt) != "" {
		b.WriteString("\n" + prompt)
	}
	return b.String()
}

// CloseOptions say what closing a session leaves behind.
type CloseOptions struct {
	// KeepTmux keeps the tmux session (routing.tmux.keepSessionOnClose);
	// otherwise it is killed.
	KeepTmux bool
	// KillHarness, with KeepTmux, terminates the harness inside the kept
	// session (routing.tmux.killHarnessOnClose): the pane and its last
	// screen stay for a post-mortem, the agent stops working.
	KillHarness bool
	// Grace is how long the harness has after SIGTERM before SIGKILL
	// (routing.tmux.harnessKillGraceSeconds; default 5 s).
	Grace time.Duration
}

// DefaultHarnessKillGrace is CloseOptions.Grace's default.
const DefaultHarnessKillGrace = 5 * time.Second

// Close marks the work item's record closed and, unless keepTmux, kills its
// tmux session (an operator's or the dispatcher's decision, never a
// side effect of respawning). It is CloseWith without terminating a kept
// harness.
func (m *Manager) Close(ctx context.Context, item workitem.Ref, keepTmux bool) error {
	return m.CloseWith(ctx, item, CloseOptions{KeepTmux: keepTmux})
}

// CloseWith marks the work item's record closed, then kills its tmux
// session or keeps it (session.retained), terminating the harness inside a
// kept one when asked (session.harness_terminated). The record is closed
// first: a crash in between leaves a closed record and a session an
// operator can see, never a live record without its intent.
func (m *Manager) CloseWith(ctx context.Context, item workitem.Ref, opts CloseOptions) error {
	defer m.lockItem(item)()
	rec, err := m.reg.Update(ctx, item, func(r *Record, exists bool) error {
		if !exists {
			return fmt.Errorf("closing %s: %w", item, ErrNoRecord)
		}
		r.Status = StatusClosed
		return nil
	})
	if err != nil {
		return err
	}
	return m.endTmux(ctx, item, rec.SessionID, rec.TmuxName, opts)
}

// endTmux kills or retains a closed session's tmux session.
func (m *Manager) endTmux(ctx context.Context, item workitem.Ref, sessionID, name string, opts CloseOptions) error {
	if !opts.KeepTmux {
		if err := m.tmux.Kill(ctx, name); err != nil {
			return err
		}
		m.observer.Observe(Observation{Event: "session.closed", Item: item, SessionID: sessionID, TmuxName: name, Detail: map[string]any{"keepTmux": false}})
		return nil
	}
	m.observer.Observe(Observation{Event: "session.closed", Item: item, SessionID: sessionID, TmuxName: name, Detail: map[string]any{"keepTmux": true}})
	m.observer.Observe(Observation{Event: "session.retained", Item: item, SessionID: sessionID, TmuxName: name, Detail: map[string]any{"killHarness": opts.KillHarness}})
	if !opts.KillHarness {
		return nil
	}
	grace := opts.Grace
	if grace <= 0 {
		grace = DefaultHarnessKillGrace
	}
	t, err := m.tmux.TerminateHarness(ctx, name, grace)
	if err != nil {
		return err
	}
	m.observer.Observe(Observation{Event: "session.harness_terminated", Item: item, SessionID: sessionID, TmuxName: name,
		Detail: map[string]any{"signalled": t.Signalled, "killed": t.Killed}})
	return nil
}

// ResetResult is the outcome of Reset.
type ResetResult struct {
	// Record is the work item's record after the reset.
	Record Record
	// Receipt is the seed prompt's delivery receipt.
	Receipt Receipt
	// Fallback is the history entry the reset appended (the conversation
	// it replaced and the artifacts the new one was pointed at).
	Fallback Fallback
}

// Reset ends the work item's harness and starts a fresh conversation in the
// same tmux session name and checkout, seeded with the work item's
// artifacts and prompt (see seedPrompt), as a respawn that cannot resume
// does. Only an active record is reset: a paused one is held by an
// operator, a closed one is started, not reset (ErrSessionClosed). The
// graph state and the checkout are not touched; the replaced conversation
// is recorded in Fallbacks with reason.
func (m *Manager) Reset(ctx context.Context, item workitem.Ref, reason, prompt string) (ResetResult, error) {
	defer m.lockItem(item)()
	rec, err := m.reg.Get(item)
	if err != nil {
		return ResetResult{}, fmt.Errorf("resetting %s: %w", item, err)
	}
	switch rec.Status {
	case StatusClosed:
		return ResetResult{Record: rec}, fmt.Errorf("%w: %s; start it instead of resetting it", ErrSessionClosed, item)
	case StatusPaused:
		return ResetResult{Record: rec}, fmt.Errorf("%w: %s is paused; resume it first, then reset", ErrSessionPaused, item)
	}
	h, bin, err := m.harness(rec.Harness)
	if err != nil {
		return ResetResult{Record: rec}, err
	}
	if fi, err := os.Stat(rec.Cwd); err != nil || !fi.IsDir() {
		return ResetResult{Record: rec}, fmt.Errorf("%w: %s for %s; prepare its workspace again and spawn", ErrCwdMissing, rec.Cwd, rec.Item)
	}
	if err := m.tmux.Kill(ctx, rec.TmuxName); err != nil {
		return ResetResult{Record: rec}, fmt.Errorf("resetting %s: ending %s: %w", item, rec.TmuxName, err)
	}
	m.observer.Observe(Observation{Event: "session.reset_killed", Item: rec.Item, SessionID: rec.SessionID, TmuxName: rec.TmuxName})
	id, err := m.newID()
	if err != nil {
		return ResetResult{Record: rec}, err
	}
	args, err := h.Interactive(id)
	if err != nil {
		return ResetResult{Record: rec}, err
	}
	m.prepareEnvironment(h, rec.Item, rec.Cwd)
	fb := Fallback{At: m.stamp(), PreviousSessionID: rec.SessionID, Reason: reason, Artifacts: m.artifacts(rec)}
	rec, err = m.reg.Update(ctx, rec.Item, func(r *Record, _ bool) error {
		r.SessionID, r.Created, r.Status, r.LastDelivery = id, fb.At, StatusActive, time.Time{}
		r.Fallbacks = append(r.Fallbacks, fb)
		if len(r.Fallbacks) > maxFallbacks {
			r.Fallbacks = r.Fallbacks[len(r.Fallbacks)-maxFallbacks:]
		}
		return nil
	})
	res := ResetResult{Record: rec, Fallback: fb}
	if err != nil {
		return res, err
	}
	spec := SpawnSpec{Name: rec.TmuxName, Cwd: rec.Cwd, Env: endpointEnv(rec.Item, rec.Parent, id, m.cfg.StateRoot), Argv: append([]string{bin}, args...), RegistryFile: m.reg.path(rec.Item)}
	if err := m.spawn(ctx, spec, id); err != nil {
		return res, err
	}
	m.observer.Observe(Observation{Event: "session.reset", Item: rec.Item, SessionID: id, TmuxName: rec.TmuxName,
		Detail: map[string]any{"previousSessionId": fb.PreviousSessionID, "artifacts": fb.Artifacts, "reason": reason}})
	opening := fmt.Sprintf("theloop: your session on %s was reset (%s), so this is a fresh conversation at the same node.\n", rec.Item, reason)
	res.Record, res.Receipt, err = m.deliverReady(ctx, rec, seedPromptWith(opening, fb, m.specDir(rec.Item), prompt))
	return res, err
}

// RegisterRequest attaches a harness conversation started outside loopd to
// a work item.
type RegisterRequest struct {
	Item workitem.Ref
	// Harness is the adapter name ("" = the default harness).
	Harness string
	// SessionID is the harness's conversation id (what --resume takes).
	SessionID string
	// Cwd is the absolute checkout the conversation works in.
	Cwd string
	// Force replaces the work item's own live record (its session is ended
	// first unless it is the same conversation). It never lifts the checks
	// against other work items.
	Force bool
}

// Register records an externally started conversation as the work item's
// session, so events reach it: the next delivery resumes it in the item's
// tmux session. The tmux name is always the item's own (TmuxName), never
// one the caller picks; a session already running under it that no live
// record of the item owns is refused (ErrSessionLive), and a conversation
// id or checkout another work item's live record holds is refused whatever
// Force says: a registration must not let one work item's session receive,
// or claim, another's work.
func (m *Manager) Register(ctx context.Context, req RegisterRequest) (Record, error) {
	if req.Item.IsZero() {
		return Record{}, fmt.Errorf("%w: register without a work item", workitem.ErrInvalid)
	}
	if !ValidSessionID(req.SessionID) {
		return Record{}, fmt.Errorf("%w: harness session id %q: give the conversation's id (a UUID, as `claude --resume` takes)", ErrInvalidName, req.SessionID)
	}
	if !filepath.IsAbs(req.Cwd) || filepath.Clean(req.Cwd) != req.Cwd {
		return Record{}, fmt.Errorf("%w: cwd %q must be an absolute, clean path", ErrInvalidName, req.Cwd)
	}
	if fi, err := os.Stat(req.Cwd); err != nil || !fi.IsDir() {
		return Record{}, fmt.Errorf("%w: %s is not a directory", ErrCwdMissing, req.Cwd)
	}
	h, _, err := m.harness(req.Harness)
	if err != nil {
		return Record{}, err
	}
	// One registration at a time across items: the cross-item checks below
	// must see every other registration's result.
	m.registerMu.Lock()
	defer m.registerMu.Unlock()
	defer m.lockItem(req.Item)()
	others, _ := m.reg.List()
	for _, o := range others {
		if o.Item == req.Item || !o.Status.Live() {
			continue
		}
		if o.SessionID == req.SessionID {
			return Record{}, fmt.Errorf("%w: conversation %s is %s's session; a conversation serves one work item", ErrSessionOwned, req.SessionID, o.Item)
		}
		if o.Cwd == req.Cwd {
			return Record{}, fmt.Errorf("%w: %s is %s's checkout; register a checkout of %s's own", ErrWorktreeOwned, req.Cwd, o.Item, req.Item)
		}
	}
	name := TmuxName(req.Item)
	prev, err := m.reg.Get(req.Item)
	hadPrev := err == nil
	if err != nil && !errors.Is(err, ErrNoRecord) && !errors.Is(err, ErrCorruptRecord) {
		return Record{}, err
	}
	same := hadPrev && prev.Status.Live() && prev.SessionID == req.SessionID
	if hadPrev && prev.Status.Live() && !same {
		if !req.Force {
			return prev, fmt.Errorf("%w: %s already has a live session (%s, conversation %s); pass force to replace it", ErrSessionLive, req.Item, prev.Status, prev.SessionID)
		}
		if err := m.tmux.Kill(ctx, prev.TmuxName); err != nil {
			return prev, fmt.Errorf("replacing %s's session: ending %s: %w", req.Item, prev.TmuxName, err)
		}
	}
	// A harness running under the item's name that no live record of the
	// item owns is not known to be this conversation: anything that can
	// reach the tmux server (an agent's pane can) could have started it to
	// receive this item's events. Only the item's own live session, or
	// none, may hold the name.
	if !same {
		switch l, perr := m.tmux.Probe(ctx, name); l {
		case LivenessLive:
			return Record{}, fmt.Errorf("%w: tmux session %s is running and no live session of %s owns it, so it is not known to be this conversation; end it (`tmux kill-session -t %s` on loopd's tmux server) and register again", ErrSessionLive, name, req.Item, name)
		case LivenessUnknown:
			return Record{}, fmt.Errorf("%w: %s: %v", ErrSessionUnknown, name, perr)
		}
	}
	rec, err := m.reg.Update(ctx, req.Item, func(r *Record, _ bool) error {
		*r = Record{Item: req.Item, Harness: h.Name(), SessionID: req.SessionID, TmuxName: name, Cwd: req.Cwd,
			Status: StatusActive, Created: m.stamp(), Fallbacks: r.Fallbacks, Parent: r.Parent, PullRequests: r.PullRequests}
		return nil
	})
	if err != nil {
		return Record{}, err
	}
	l, _ := m.tmux.Probe(ctx, name)
	m.observer.Observe(Observation{Event: "session.registered", Item: req.Item, SessionID: req.SessionID, TmuxName: name,
		Detail: map[string]any{"harness": h.Name(), "cwd": req.Cwd, "tmux": l.String(), "replaced": hadPrev && prev.Status.Live() && !same}})
	return rec, nil
}
