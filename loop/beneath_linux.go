package loop

import (
	"fmt"
	"os"
	"runtime"
	"syscall"

	"golang.org/x/sys/unix"
)

// openBeneath opens rel below b read-only, without blocking, resolved
// beneath b. A kernel without openat2 (before 5.6) goes through os.Root.
func openBeneath(b *beneath, rel string) (int, error) {
	root := b.path
	b.once.Do(func() {
		fd, err := unix.Open(root, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
		if err != nil {
			b.err = err
			return
		}
		b.dir = os.NewFile(uintptr(fd), root)
	})
	if b.err != nil {
		return -1, b.err
	}
	dfd := int(b.dir.Fd())
	how := unix.OpenHow{Flags: unix.O_RDONLY | unix.O_NONBLOCK | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_MAGICLINKS}
	for {
		fd, err := unix.Openat2(dfd, rel, &how)
		switch err {
		case nil:
			return fd, nil
		case unix.EINTR, unix.EAGAIN:
			continue
		case unix.EXDEV:
			return -1, fmt.Errorf("%w: a symbolic link on the way leads outside %s", ErrUnsafePath, root)
		case unix.ENOSYS, unix.EPERM:
			// No openat2 (old kernel, or a seccomp filter refusing it).
			r, rerr := os.OpenRoot(root)
			if rerr != nil {
				return -1, rerr
			}
			defer r.Close()
			f, ferr := r.OpenFile(rel, os.O_RDONLY|syscall.O_NONBLOCK, 0)
			if ferr != nil {
				return -1, beneathError(root, ferr)
			}
			defer f.Close()
			return unix.Dup(int(f.Fd()))
		default:
			return -1, err
		}
	}
}

// keepAlive keeps b's descriptor open until a call that used it returns.
func keepAlive(b *beneath) { runtime.KeepAlive(b.dir) }
