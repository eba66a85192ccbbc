//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package loop

import (
	"os"
	"sync"
)

// Platforms without flock(2) get a lock that excludes goroutines of this
// process only: another process can still write the state concurrently.
// theloop's daemon, CLI and Stop hook run on Linux and macOS.
var (
	heldMu sync.Mutex
	held   = map[string]bool{}
)

// tryLock takes path's in-process lock, creating the file so that callers
// see the same side effects as with flock. The unlock is idempotent.
func tryLock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	f.Close()
	heldMu.Lock()
	defer heldMu.Unlock()
	if held[path] {
		return nil, errLockHeld
	}
	held[path] = true
	var once sync.Once
	return func() {
		once.Do(func() {
			heldMu.Lock()
			delete(held, path)
			heldMu.Unlock()
		})
	}, nil
}
