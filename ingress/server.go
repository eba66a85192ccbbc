package ingress

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
	"time"
)

// Server timeouts. The read timeout leaves room for a 25 MB body on a slow
// link; the write timeout covers the Sink hand-off.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 60 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 120 * time.Second
	DefaultMaxHeaderBytes    = 64 << 10
)

// Server runs a Handler (normally a Receiver) on its own listener with the
// timeouts above. Start binds and serves in one goroutine; Shutdown or Close
// ends it. The daemon may instead mount the Receiver on a server of its own.
type Server struct {
	srv    *http.Server
	mu     sync.Mutex
	ln     net.Listener
	limits ConnLimits
	lim    *limitListener
	done   chan error
}

// SetConnLimits bounds the open connections (connlimit.go); call it before
// Start.
func (s *Server) SetConnLimits(l ConnLimits) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.limits = l
}

// RefusedConns counts the connections closed at once for being over the
// limits.
func (s *Server) RefusedConns() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.lim == nil {
		return 0
	}
	return s.lim.refused.Load()
}

// NewServer returns a Server for addr (host:port; port 0 picks a free one)
// serving h.
func NewServer(addr string, h http.Handler) *Server {
	return &Server{srv: &http.Server{
		Addr:              addr,
		Handler:           h,
		ReadHeaderTimeout: DefaultReadHeaderTimeout,
		ReadTimeout:       DefaultReadTimeout,
		WriteTimeout:      DefaultWriteTimeout,
		IdleTimeout:       DefaultIdleTimeout,
		MaxHeaderBytes:    DefaultMaxHeaderBytes,
	}}
}

// HTTPServer exposes the underlying server to adjust timeouts before Start.
func (s *Server) HTTPServer() *http.Server { return s.srv }

// Start binds the address and serves in the background. It returns once
// the listener is bound (so Addr is valid), or the bind error.
func (s *Server) Start() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return errors.New("ingress: server already started")
	}
	ln, err := net.Listen("tcp", s.srv.Addr)
	if err != nil {
		return err
	}
	if s.limits.Total > 0 || s.limits.PerIP > 0 {
		s.lim = newLimitListener(ln, s.limits)
		ln = s.lim
	}
	s.ln = ln
	s.done = make(chan error, 1)
	go func() {
		err := s.srv.Serve(ln)
		if errors.Is(err, http.ErrServerClosed) {
			err = nil
		}
		s.done <- err
	}()
	return nil
}

// Addr is the bound address ("" before Start).
func (s *Server) Addr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return ""
	}
	return s.ln.Addr().String()
}

// Shutdown stops accepting, waits for in-flight requests (bounded by ctx)
// and for the serving goroutine to end.
func (s *Server) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	return errors.Join(err, s.wait())
}

// Close stops at once, dropping in-flight requests.
func (s *Server) Close() error {
	err := s.srv.Close()
	return errors.Join(err, s.wait())
}

func (s *Server) wait() error {
	s.mu.Lock()
	done := s.done
	s.mu.Unlock()
	if done == nil {
		return nil
	}
	err := <-done
	done <- nil // later waits return at once
	return err
}
