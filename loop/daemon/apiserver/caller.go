package apiserver

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
)

// Caller is who is calling the control plane, as its transport
// authenticated them — never as a request body says. The verbs that act
// for an operator (graph force and skip, session stop/pause/resume) record
// Identity as their actor.
type Caller struct {
	// Identity is the actor recorded: "os-user:alice" (a socket peer's OS
	// user), "github:alice" (a socket peer the daemon maps to the
	// operator's GitHub login), "service-token" (a TCP client holding the
	// bearer token).
	Identity string
	// Transport is "unix" or "tcp".
	Transport string
	// Peer is a socket caller's kernel-reported credentials (zero on TCP).
	Peer Peer
	// Refused, when set, says why this caller may not use the control
	// plane (inside an agent session, another OS user, credentials that
	// could not be read). Authenticated answers 403 with it.
	Refused error
}

// Peer is a unix-socket caller's credentials as the kernel reports them
// (SO_PEERCRED): the connecting process's user and process ids at
// connect(2) time.
type Peer struct {
	UID, GID, PID int
}

// PeerPolicy decides, once per socket connection, who the peer is
// (Caller.Identity) or why it is refused (err, answered 403 on every
// request of the connection). loopd's policy refuses a peer inside an
// agent session and a peer of another OS user, and names the operator.
type PeerPolicy func(Peer) (identity string, err error)

// TokenIdentity is the identity of a TCP client that presented the bearer
// token: the token is one shared secret, so it names no person.
const TokenIdentity = "service-token"

// Errors of caller authentication.
var (
	// ErrForbidden: the caller may not use the control plane, or may not
	// act as the actor its request names (403).
	ErrForbidden = errors.New("forbidden")
	// ErrNoPeerCredentials: the socket peer's credentials could not be
	// read, so the peer is refused (fail closed).
	ErrNoPeerCredentials = errors.New("the control socket could not read its peer's credentials")
)

type callerKey struct{}

// WithCaller returns ctx carrying c (for embedders that authenticate
// callers their own way, and for tests).
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerOf returns the caller ctx carries (false when no transport
// authenticated one).
func CallerOf(ctx context.Context) (Caller, bool) {
	c, ok := ctx.Value(callerKey{}).(Caller)
	return c, ok
}

// PeerContext returns an http.Server.ConnContext for a unix-socket
// listener: at accept time it reads the connecting process's credentials
// (SO_PEERCRED) and asks policy who it is, so the answer is taken while
// the process that connected is alive and holds for every request on the
// connection. Credentials that cannot be read, a policy error or a nil
// policy make a refused Caller (fail closed); Authenticated answers 403.
// A connection that is not a unix socket is refused too.
func PeerContext(policy PeerPolicy) func(context.Context, net.Conn) context.Context {
	return func(ctx context.Context, c net.Conn) context.Context {
		caller := Caller{Transport: "unix"}
		uc, ok := c.(*net.UnixConn)
		if !ok {
			caller.Refused = fmt.Errorf("%w: the connection is not a unix socket (%T)", ErrNoPeerCredentials, c)
			return WithCaller(ctx, caller)
		}
		p, err := peerCredentials(uc)
		caller.Peer = p
		switch {
		case err != nil:
			caller.Refused = fmt.Errorf("%w: %v", ErrNoPeerCredentials, err)
		case policy == nil:
			caller.Refused = errors.New("the control socket has no peer policy; it refuses every caller")
		default:
			id, err := policy(p)
			switch {
			case err != nil:
				caller.Refused = err
			case id == "":
				caller.Refused = fmt.Errorf("the control socket's peer policy named no identity for uid %d", p.UID)
			default:
				caller.Identity = id
			}
		}
		return WithCaller(ctx, caller)
	}
}

// Authenticated serves next only to a caller a transport authenticated
// and admitted: PeerContext on the unix socket, RequireToken on TCP.
// Everyone else — a refused peer, or a request no transport vouched
// for — gets 403 {"detail": ...} naming why. loopd wraps its whole control
// plane (/api/v1, /metrics, /mcp) in it.
func Authenticated(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := CallerOf(r.Context())
		switch {
		case !ok:
			writeJSON(w, http.StatusForbidden, map[string]string{"detail": "loopd's control plane: no authenticated caller (the listener vouches for none)"})
		case c.Refused != nil:
			writeJSON(w, http.StatusForbidden, map[string]string{"detail": "loopd's control plane refuses this caller: " + c.Refused.Error()})
		default:
			next.ServeHTTP(w, r)
		}
	})
}

// actorOf is the actor an operator verb records: the authenticated
// caller's identity. A body actor that names someone else is refused
// (ErrForbidden): who acted is what the transport proved, not what the
// request claims. No authenticated caller is refused as well.
func actorOf(r *http.Request, claimed string) (string, error) {
	c, ok := CallerOf(r.Context())
	if !ok || c.Refused != nil || c.Identity == "" {
		return "", fmt.Errorf("%w: this verb records who acts, and no transport authenticated the caller (serve the API behind apiserver.PeerContext or apiserver.RequireToken)", ErrForbidden)
	}
	if claimed != "" && claimed != c.Identity {
		return "", fmt.Errorf("%w: actor %q: the actor comes from the caller's identity, which is %q; leave actor out (loopctl: drop --actor)", ErrForbidden, claimed, c.Identity)
	}
	return c.Identity, nil
}
