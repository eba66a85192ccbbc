//go:build unix && !linux

package loop

import (
	"os"
	"syscall"
)

// openBeneath opens rel below root read-only, without blocking, resolved
// beneath root through os.Root.
func openBeneath(b *beneath, rel string) (int, error) {
	root := b.path
	r, err := os.OpenRoot(root)
	if err != nil {
		return -1, err
	}
	defer r.Close()
	f, err := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return -1, beneathError(root, err)
	}
	defer f.Close()
	return syscall.Dup(int(f.Fd()))
}

func keepAlive(*beneath) {}
