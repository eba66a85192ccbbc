//go:build !linux

package apiserver

import (
	"fmt"
	"net"
	"runtime"
)

// peerCredentials is not implemented off Linux: the socket refuses every
// peer there (fail closed) rather than trust one it cannot identify.
func peerCredentials(*net.UnixConn) (Peer, error) {
	return Peer{}, fmt.Errorf("reading a unix socket peer's credentials is not supported on %s", runtime.GOOS)
}
