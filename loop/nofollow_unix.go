//go:build unix

package loop

import "syscall"

// oNoFollow makes an open fail on a symbolic link as its last component.
const oNoFollow = syscall.O_NOFOLLOW

// oNonBlock keeps an open of a named pipe from waiting for a writer (or a
// reader): a FIFO planted where theloop expects a file must not hang it.
const oNonBlock = syscall.O_NONBLOCK
