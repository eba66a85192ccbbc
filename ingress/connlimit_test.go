package ingress

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The bounds on a real listener: per address, in total, and the reserve
// a quiet address may still use when the total is reached.
func TestConnLimits(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("127.0.0.0/8 source addresses: Linux")
	}
	inner, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	ln := newLimitListener(inner, ConnLimits{Total: 3, PerIP: 3, Reserve: 1})
	defer ln.Close()
	accepted := make(chan net.Conn, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func(from string) bool {
		d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
		c, err := d.Dial("tcp", inner.Addr().String())
		if err != nil {
			return false // reset before the dial returned
		}
		t.Cleanup(func() { c.Close() })
		select {
		case <-accepted:
			return true
		case <-time.After(500 * time.Millisecond):
			// Refused: closed by the listener (the read sees the reset).
			_ = c.SetReadDeadline(time.Now().Add(2 * time.Second))
			_, rerr := c.Read(make([]byte, 1))
			require.Error(t, rerr)
			return false
		}
	}
	require.True(t, dial("127.0.0.2"))
	require.True(t, dial("127.0.0.2"))
	require.True(t, dial("127.0.0.2"), "total reached with this one")
	require.False(t, dial("127.0.0.2"), "per-address bound; not quiet either")
	require.True(t, dial("127.0.0.4"), "a quiet address uses the reserve")
	require.False(t, dial("127.0.0.5"), "the reserve is spent")
	require.Equal(t, int64(2), ln.refused.Load())
}
