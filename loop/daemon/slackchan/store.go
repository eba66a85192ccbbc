package slackchan

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"
)

// Thread is a work item's Slack thread: the channel and the parent
// message's ts, which Slack uses as the thread's id.
type Thread struct {
	Channel string `json:"channel"`
	TS      string `json:"ts"`
}

// StoreFile is the file under the state dir that holds the bindings.
const StoreFile = "slack.json"

// seenTTL is how long a handled event id is remembered: Slack retries a
// delivery three times within minutes, so an hour covers every retry
// with room to spare; seenMax bounds the ledger whatever the rate.
const (
	seenTTL = time.Hour
	seenMax = 4096
)

// storeData is slack.json: threads by work-item ref, and the event ids
// (and slash-command trigger ids) already handled with when.
type storeData struct {
	Threads map[string]Thread    `json:"threads"`
	Seen    map[string]time.Time `json:"seen"`
}

// store keeps storeData on disk, written atomically (temp file + rename)
// before anything that depends on it happens: a thread's ts is on disk
// before the thread is used, an event id before its effects.
type store struct {
	path string
	mu   sync.Mutex
	data storeData
}

func openStore(dir string, now time.Time) (*store, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("slack channel: state dir %s: %w", dir, err)
	}
	s := &store{path: filepath.Join(dir, StoreFile), data: storeData{Threads: map[string]Thread{}, Seen: map[string]time.Time{}}}
	b, err := os.ReadFile(s.path)
	switch {
	case os.IsNotExist(err):
		return s, nil
	case err != nil:
		return nil, fmt.Errorf("slack channel: %w", err)
	}
	var d storeData
	if err := json.Unmarshal(b, &d); err != nil {
		// Keep the bad file for a post-mortem; start afresh (threads are
		// reopened at the next spawn).
		bad := s.path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
		_ = os.Rename(s.path, bad)
		return s, nil
	}
	if d.Threads != nil {
		s.data.Threads = d.Threads
	}
	if d.Seen != nil {
		s.data.Seen = d.Seen
	}
	return s, nil
}

func (s *store) thread(ref string) (Thread, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.data.Threads[ref]
	return t, ok
}

// itemOf finds the work item whose thread is (channel, ts).
func (s *store) itemOf(channel, ts string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for ref, t := range s.data.Threads {
		if t.TS == ts && t.Channel == channel {
			return ref, true
		}
	}
	return "", false
}

func (s *store) bind(ref string, t Thread) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.data.Threads[ref] = t
	return s.saveLocked()
}

// firstSight records id as handled at now and reports whether it was new.
// Ids older than seenTTL are forgotten; past seenMax the oldest go first.
func (s *store) firstSight(id string, now time.Time) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.data.Seen[id]; dup {
		return false, nil
	}
	for k, at := range s.data.Seen {
		if now.Sub(at) > seenTTL {
			delete(s.data.Seen, k)
		}
	}
	if len(s.data.Seen) >= seenMax {
		ids := make([]string, 0, len(s.data.Seen))
		for k := range s.data.Seen {
			ids = append(ids, k)
		}
		sort.Slice(ids, func(i, j int) bool { return s.data.Seen[ids[i]].Before(s.data.Seen[ids[j]]) })
		for _, k := range ids[:len(ids)-seenMax+1] {
			delete(s.data.Seen, k)
		}
	}
	s.data.Seen[id] = now.UTC()
	return true, s.saveLocked()
}

func (s *store) saveLocked() error {
	b, err := json.MarshalIndent(s.data, "", "  ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(s.path), ".slack-*.json")
	if err != nil {
		return fmt.Errorf("slack channel: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("slack channel: writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp.Name(), s.path); err != nil {
		return fmt.Errorf("slack channel: %w", err)
	}
	return nil
}
