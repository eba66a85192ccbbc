//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package loop

import (
	"errors"
	"os"
	"sync"
	"syscall"
)

// tryLock takes a non-blocking exclusive flock(2) on path, creating the
// file (a symbolic link at path is refused). Each call opens its own file description, so the lock excludes
// other goroutines of this process as well as other processes; the kernel
// releases it when the holder dies. It returns errLockHeld when another
// holder has it. The returned unlock is idempotent.
func tryLock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|syscall.O_NOFOLLOW, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	if err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, errLockHeld
		}
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// Closing the descriptor releases the lock; unlocking first
			// makes the release explicit.
			_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
			_ = f.Close()
		})
	}, nil
}
