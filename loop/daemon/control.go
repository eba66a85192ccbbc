package daemon

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/ingress"
	"github.com/theloop-dev/theloop/sessions"
)

// controlStore is the durable control record (daemon-spec §5.3): the last
// control command per work item, in the "control" section of
// <state root>/portable/<slug>.json.
//
// TODO(ingress merge): package ingress (branch ingress) owns this record;
// when it lands this type becomes a thin adapter over it.
type controlStore struct {
	dir string
	mu  sync.Mutex
}

type controlRecord struct {
	Ref         string          `json:"ref"`
	Command     ingress.Command `json:"command"`
	Source      string          `json:"source"`
	Actor       string          `json:"actor"`
	RequestedAt string          `json:"requestedAt"`
	Note        string          `json:"note,omitempty"`
}

func openControlStore(root string) (*controlStore, error) {
	dir := filepath.Join(root, "portable")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("daemon: control records %s: %w", dir, err)
	}
	return &controlStore{dir: dir}, nil
}

func (c *controlStore) path(item sessions.WorkItem) string {
	return filepath.Join(c.dir, item.Slug()+".json")
}

func (c *controlStore) read(item sessions.WorkItem) (map[string]json.RawMessage, error) {
	b, err := os.ReadFile(c.path(item))
	if errors.Is(err, os.ErrNotExist) {
		return map[string]json.RawMessage{}, nil
	}
	if err != nil {
		return nil, err
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil || m == nil {
		return map[string]json.RawMessage{}, nil
	}
	return m, nil
}

// Last returns the last recorded command (nil when none).
func (c *controlStore) Last(item sessions.WorkItem) (*controlRecord, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.read(item)
	if err != nil {
		return nil, err
	}
	raw, ok := m["control"]
	if !ok || string(raw) == "null" {
		return nil, nil
	}
	var r controlRecord
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, nil
	}
	if r.Ref != item.String() {
		return nil, nil
	}
	return &r, nil
}

// StartRequested reports whether the last command arms the work item.
func (c *controlStore) StartRequested(item sessions.WorkItem) (bool, error) {
	r, err := c.Last(item)
	if err != nil || r == nil {
		return false, err
	}
	return r.Command.Arms(), nil
}

// Record writes cmd as the work item's last command.
func (c *controlStore) Record(item sessions.WorkItem, cmd ingress.Command, source, actor, note string, at time.Time) error {
	r := controlRecord{Ref: item.String(), Command: cmd, Source: source, Actor: actor, RequestedAt: at.UTC().Format(sessions.TimeLayout), Note: note}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	return c.write(item, b)
}

// Clear writes a tombstone.
func (c *controlStore) Clear(item sessions.WorkItem) error {
	return c.write(item, []byte("null"))
}

func (c *controlStore) write(item sessions.WorkItem, section []byte) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	m, err := c.read(item)
	if err != nil {
		return err
	}
	ref, _ := json.Marshal(item.String())
	m["ref"] = ref
	m["control"] = section
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return err
	}
	tmp := c.path(item) + ".tmp"
	if err := os.WriteFile(tmp, append(b, '\n'), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, c.path(item))
}
