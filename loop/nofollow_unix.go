//go:build unix

package loop

import "syscall"

// oNoFollow makes an open fail on a symbolic link as its last component.
const oNoFollow = syscall.O_NOFOLLOW
