package ingress

import (
	"net"
	"sync"
	"sync/atomic"
)

// Connection limits for the webhook port.
//
// Every connection holds a file descriptor for as long as its sender keeps
// it open, and anyone who reaches the port can open them: 1,500 slow-body
// connections under a 1,024-descriptor limit once left loopd unable to
// open anything — its queue files, git, tmux, and the control socket the
// operator would use to look. The listener below holds the port's
// connections under a total bound (the daemon sets it well below the
// process's descriptor limit, keeping the rest for everything else) and a
// bound per remote address, so one sender cannot take the whole allowance.
// A connection over either bound is accepted and closed at once: leaving
// it in the kernel's backlog would stall the senders behind it, signed
// ones included.
//
// When the total is reached by a crowd of addresses, a sender that holds
// (almost) nothing — GitHub delivering one webhook — must still get in:
// Reserve connections beyond Total are kept for addresses holding fewer
// than QuietConns, so the flood's own addresses cannot take them.
//
// Behind a reverse proxy every connection comes from the proxy's address:
// the per-address bound then applies to the proxy as a whole.

// ConnLimits bound the webhook listener's open connections (0: no bound).
type ConnLimits struct {
	// Total bounds all open connections.
	Total int
	// PerIP bounds the open connections from one remote IP address.
	PerIP int
	// Reserve is how many connections beyond Total an address holding
	// fewer than QuietConns may still open.
	Reserve int
}

// QuietConns: an address holding fewer connections than this may use the
// reserve.
const QuietConns = 2

// limitListener enforces ConnLimits on accepted connections.
type limitListener struct {
	net.Listener
	limits  ConnLimits
	refused atomic.Int64

	mu    sync.Mutex
	total int
	perIP map[string]int
}

func newLimitListener(ln net.Listener, l ConnLimits) *limitListener {
	return &limitListener{Listener: ln, limits: l, perIP: map[string]int{}}
}

// Accept returns the next connection within the bounds; those over them
// are closed as they come.
func (l *limitListener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := remoteIP(c)
		l.mu.Lock()
		held := l.perIP[ip]
		over := l.limits.PerIP > 0 && held >= l.limits.PerIP
		if l.limits.Total > 0 && l.total >= l.limits.Total {
			over = over || held >= QuietConns || l.total >= l.limits.Total+l.limits.Reserve
		}
		if !over {
			l.total++
			l.perIP[ip]++
		}
		l.mu.Unlock()
		if over {
			l.refused.Add(1)
			if tc, ok := c.(*net.TCPConn); ok {
				_ = tc.SetLinger(0) // a reset: no TIME_WAIT for a flood
			}
			_ = c.Close()
			continue
		}
		return &limitedConn{Conn: c, l: l, ip: ip}, nil
	}
}

func (l *limitListener) release(ip string) {
	l.mu.Lock()
	l.total--
	if n := l.perIP[ip] - 1; n > 0 {
		l.perIP[ip] = n
	} else {
		delete(l.perIP, ip)
	}
	l.mu.Unlock()
}

func remoteIP(c net.Conn) string {
	if a, ok := c.RemoteAddr().(*net.TCPAddr); ok {
		return a.IP.String()
	}
	host, _, err := net.SplitHostPort(c.RemoteAddr().String())
	if err != nil {
		return c.RemoteAddr().String()
	}
	return host
}

// limitedConn gives its slot back once, when closed.
type limitedConn struct {
	net.Conn
	l    *limitListener
	ip   string
	once sync.Once
}

func (c *limitedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() { c.l.release(c.ip) })
	return err
}
