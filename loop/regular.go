package loop

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"
)

// errNotRegular: a path theloop reads or appends to is a FIFO, a device or
// a directory. The agent writes the checkout, and a named pipe planted as
// harness-config.yaml or graph-state.json would block an open forever.
var errNotRegular = fmt.Errorf("%w: not a regular file", ErrUnsafePath)

// openRegular opens path with flag without blocking on a named pipe and
// returns the file only when it is a regular file.
func openRegular(path string, flag int, perm fs.FileMode) (*os.File, error) {
	f, err := os.OpenFile(path, flag|oNonBlock, perm)
	if err != nil {
		return nil, err
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		f.Close()
		return nil, &fs.PathError{Op: "open", Path: path, Err: errNotRegular}
	}
	return f, nil
}

// readCapped reads the regular file at path when it holds at most limit
// bytes. A larger file is refused with an error wrapping ErrTooLarge that
// names the file, its size and the cap — decided from fstat before a byte
// is read, and again through a LimitReader for a file that grows while it
// is read — so a sparse 1 GB file costs a stat, not a gigabyte of memory.
func readCapped(path string, limit int64) ([]byte, error) { return readRegular(path, limit) }

// readCappedPortable is readCapped through package os, for systems without
// the unix calls readRegular makes.
func readCappedPortable(path string, limit int64) ([]byte, error) {
	f, err := openRegular(path, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return readOpenCapped(f, limit)
}

// readOpenCapped reads the open file f when it is a regular file of at
// most limit bytes.
func readOpenCapped(f *os.File, limit int64) ([]byte, error) {
	path := f.Name()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, &fs.PathError{Op: "open", Path: path, Err: errNotRegular}
	}
	if fi.Size() > limit {
		return nil, tooLarge(path, fi.Size(), limit)
	}
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(data)) > limit {
		return nil, tooLarge(path, -1, limit)
	}
	return data, nil
}

// beneathError is an os.Root refusal said as theloop says it: a path
// that escapes root is ErrUnsafePath.
func beneathError(root string, err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) && strings.Contains(pe.Err.Error(), "escapes") {
		return &fs.PathError{Op: pe.Op, Path: pe.Path, Err: fmt.Errorf("%w: a symbolic link on the way leads outside %s", ErrUnsafePath, root)}
	}
	return err
}

// tooLarge builds readCapped's refusal (size < 0: grown past the cap while
// being read, size unknown).
func tooLarge(path string, size, limit int64) error {
	return &tooLargeError{path: path, size: size, limit: limit}
}

// tooLargeError is readCapped's refusal; errors.Is(err, ErrTooLarge).
type tooLargeError struct {
	path        string
	size, limit int64
}

func (e *tooLargeError) Error() string {
	if e.size < 0 {
		return fmt.Sprintf("%s grew past the %d bytes theloop reads while it was being read", e.path, e.limit)
	}
	return fmt.Sprintf("%s is %d bytes, more than the %d theloop reads", e.path, e.size, e.limit)
}

func (e *tooLargeError) Is(target error) bool { return target == ErrTooLarge }
