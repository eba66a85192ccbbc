package stopgate

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/theloop-dev/theloop/loop"
	"github.com/theloop-dev/theloop/sessions"
)

// StateRootEnv names theloop's state root for the gate, ahead of the CLI
// config's state.root.
const StateRootEnv = "THE_LOOP_STATE_ROOT"

// Session is what the registry knows about a harness session.
type Session struct {
	// WorkItem is the spec id (issue-<n>).
	WorkItem string
	// Cwd is where the session runs (its worktree).
	Cwd string
}

// ErrNoSession: the session is not one of theloop's. The gate lets it stop
// without a word.
var ErrNoSession = errors.New("not a theloop session")

// SessionLookup resolves a harness session id to the work item it works on.
// It must be cheap (it runs on every stop of every session when loop-gate is
// installed for the user) and must not write.
type SessionLookup func(sessionID string) (Session, error)

// RegistryLookup looks session ids up in the session registry
// (sessions.LookupBySessionID) under the state root: $THE_LOOP_STATE_ROOT,
// else state.root of the operator's CLI config ($THE_LOOP_CLI_CONFIG, else
// ~/.the-loop/cli-config.yaml), else ~/.the-loop. A relative state root is
// taken from the home directory: the gate runs in the agent's checkout,
// which is not where the daemon runs. The repository's own
// .the-loop/cli-config.yaml is never read — the agent being gated can write
// it. The config is read only when a lookup happens.
func RegistryLookup(getenv func(string) string, homeDir func() (string, error)) SessionLookup {
	return func(sessionID string) (Session, error) {
		root, err := stateRoot(getenv, homeDir)
		if err != nil {
			return Session{}, err
		}
		dir := sessions.RegistryDir(root)
		// No registry, no theloop session: settle it with one stat before
		// the lookup validates the id (its first use costs a regular
		// expression compile, ~2 ms of a cold process).
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return Session{}, ErrNoSession
		}
		rec, err := sessions.LookupBySessionID(dir, sessionID)
		if errors.Is(err, sessions.ErrNoRecord) || errors.Is(err, sessions.ErrInvalidName) {
			return Session{}, ErrNoSession
		}
		if err != nil {
			return Session{}, err
		}
		id := rec.Item.SpecID()
		if id == "" {
			return Session{}, fmt.Errorf("session %s works on %s, which has no spec directory; set %s in the session", sessionID, rec.Item, WorkItemEnv)
		}
		return Session{WorkItem: id, Cwd: rec.Cwd}, nil
	}
}

func stateRoot(getenv func(string) string, homeDir func() (string, error)) (string, error) {
	if r := getenv(StateRootEnv); r != "" {
		return filepath.Abs(r)
	}
	home, herr := homeDir()
	path := getenv(loop.CLIConfigEnv)
	if path == "" && herr == nil && home != "" {
		p := filepath.Join(home, filepath.FromSlash(loop.CLIConfigFile))
		if _, err := os.Stat(p); err == nil {
			path = p
		}
	}
	root := loop.DefaultStateRoot
	if path != "" {
		cfg, err := loop.LoadCLIConfig(loop.CLIConfigSource{
			Path:      path,
			LookupEnv: func(k string) (string, bool) { v := getenv(k); return v, v != "" },
			HomeDir:   homeDir,
		})
		if err != nil {
			return "", err
		}
		root = cfg.StateRoot
	}
	if filepath.IsAbs(root) {
		return root, nil
	}
	if herr != nil || home == "" {
		return "", fmt.Errorf("state root %q is relative and there is no home directory to resolve it against; set %s", root, StateRootEnv)
	}
	return filepath.Join(home, root), nil
}
