//go:build unix

package loop

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// oNoFollow makes an open fail on a symbolic link as its last component.
const oNoFollow = syscall.O_NOFOLLOW

// oNonBlock keeps an open of a named pipe from waiting for a writer (or a
// reader): a FIFO planted where theloop expects a file must not hang it.
const oNonBlock = syscall.O_NONBLOCK

// singleLink refuses a file with more than one hard link: a link planted
// by a sandboxed session to a file it cannot read must not be read with
// theloop's rights.
func singleLink(f *os.File) error {
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink > 1 {
		return &fs.PathError{Op: "open", Path: f.Name(), Err: fmt.Errorf("%w: %d hard links", ErrUnsafePath, st.Nlink)}
	}
	return nil
}

// readRegular reads the regular file at path when it holds at most limit
// bytes, in as few system calls as the kernel allows: one open (without
// blocking on a named pipe), one fstat that decides the type and the
// size, and one read into a buffer one byte larger than that size, which
// ends the file when it returns exactly the size (more reads only when the
// kernel returns less, or the file grew).
// The state and every artifact of every work item go through it on each
// `check --all`; os.Open would add a poller registration and a second
// fstat, io.ReadAll a growing buffer.
func readRegular(path string, limit int64) ([]byte, error) {
	return readRegularInto(path, limit, nil)
}

// readRegularInto is readRegular reading into a buffer from alloc (a
// slice of length 0 and at least the given capacity) instead of a fresh
// one; nil alloc allocates.
func readRegularInto(path string, limit int64, alloc func(n int) []byte) ([]byte, error) {
	var fd int
	var err error
	for {
		fd, err = syscall.Open(path, syscall.O_RDONLY|syscall.O_NONBLOCK|syscall.O_CLOEXEC, 0)
		if err != syscall.EINTR {
			break
		}
	}
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	return readFD(fd, path, limit, alloc)
}

// readBeneathInto is readRegularInto for rel below root, resolved beneath
// root (openat2 RESOLVE_BENEATH): a symbolic link on the way — the file
// or a directory — that points outside root is refused, so a link the
// agent planted in its checkout never makes theloop read with its own
// rights what lies elsewhere on the host. Links that stay inside work.
func readBeneathInto(b *beneath, rel string, limit int64, alloc func(n int) []byte) ([]byte, error) {
	path := filepath.Join(b.path, rel)
	fd, err := openBeneath(b, rel)
	keepAlive(b)
	if err != nil {
		return nil, &fs.PathError{Op: "open", Path: path, Err: err}
	}
	defer syscall.Close(fd)
	return readFD(fd, path, limit, alloc)
}

// openBeneathFile is openBeneath as an *os.File.
func openBeneathFile(b *beneath, rel string) (*os.File, error) {
	fd, err := openBeneath(b, rel)
	keepAlive(b)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), filepath.Join(b.path, rel)), nil
}

// readFD reads the open regular file fd (see readRegularInto).
func readFD(fd int, path string, limit int64, alloc func(n int) []byte) ([]byte, error) {
	var st syscall.Stat_t
	if err := fstatRetry(fd, &st); err != nil {
		return nil, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG {
		return nil, &fs.PathError{Op: "open", Path: path, Err: errNotRegular}
	}
	if st.Size > limit {
		return nil, tooLarge(path, st.Size, limit)
	}
	// One byte more than the size: a file that grew since the fstat shows
	// without a second allocation, and the cap is checked on what was read.
	var buf []byte
	if alloc != nil {
		buf = alloc(int(st.Size + 1))
	} else {
		buf = make([]byte, 0, st.Size+1)
	}
	for {
		if len(buf) == cap(buf) {
			if int64(len(buf)) > limit {
				return nil, tooLarge(path, -1, limit)
			}
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := syscall.Read(fd, buf[len(buf):cap(buf)])
		if err == syscall.EINTR || err == syscall.EAGAIN {
			continue
		}
		if err != nil {
			return nil, &fs.PathError{Op: "read", Path: path, Err: err}
		}
		if n == 0 {
			break
		}
		buf = buf[:len(buf)+n]
		if int64(len(buf)) == st.Size && len(buf) < cap(buf) {
			// Asked for more, the read stopped at the size the fstat
			// reported: that is the whole file as it stood then, so the
			// read that would only confirm the end is saved (one system
			// call per artifact on every check). A file that grew shows
			// as a longer read and is read on, as before.
			break
		}
	}
	if int64(len(buf)) > limit {
		return nil, tooLarge(path, -1, limit)
	}
	return buf, nil
}

func fstatRetry(fd int, st *syscall.Stat_t) error {
	for {
		err := syscall.Fstat(fd, st)
		if err != syscall.EINTR {
			return err
		}
	}
}
