//go:build unix

package loop

import (
	"fmt"
	"io/fs"
	"os"
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
