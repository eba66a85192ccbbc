package dashboard

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/theloop-dev/theloop/loop/api/login"
)

// Session lifetime and cookie (a login URL's is login.TTL).
const (
	// SessionTTL bounds a browser session.
	SessionTTL = 12 * time.Hour
	// cookieName is the session cookie (HttpOnly, SameSite=Strict).
	cookieName = "theloop_dashboard"
)

// sessions holds the login state: used nonces and live browser sessions.
type sessions struct {
	key []byte

	mu       sync.Mutex
	used     map[string]time.Time // nonce → expiry
	sessions map[string]*session  // cookie value → session
}

type session struct {
	csrf    string
	expires time.Time
}

func newSessions(key []byte) *sessions {
	return &sessions{key: key, used: map[string]time.Time{}, sessions: map[string]*session{}}
}

// redeem checks a login token and, once, turns it into a session.
func (s *sessions) redeem(token string, now time.Time) (id string, err error) {
	if len(token) > 256 {
		return "", login.ErrBadToken
	}
	parts := strings.Split(token, ".")
	if len(parts) != 3 || len(parts[0]) != 32 {
		return "", login.ErrBadToken
	}
	body := parts[0] + "." + parts[1]
	if subtle.ConstantTimeCompare([]byte(login.MAC(s.key, body)), []byte(parts[2])) != 1 {
		return "", login.ErrBadToken
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || now.Unix() > exp {
		return "", login.ErrBadToken
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.gcLocked(now)
	if _, dup := s.used[parts[0]]; dup {
		return "", login.ErrBadToken
	}
	s.used[parts[0]] = time.Unix(exp, 0)
	id, csrf := randomHex(32), randomHex(32)
	s.sessions[id] = &session{csrf: csrf, expires: now.Add(SessionTTL)}
	return id, nil
}

// lookup returns the session of a cookie value.
func (s *sessions) lookup(id string, now time.Time) (*session, bool) {
	if id == "" || len(id) > 128 {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	ss, ok := s.sessions[id]
	if !ok || now.After(ss.expires) {
		delete(s.sessions, id)
		return nil, false
	}
	return ss, true
}

func (s *sessions) gcLocked(now time.Time) {
	for n, exp := range s.used {
		if now.After(exp) {
			delete(s.used, n)
		}
	}
	for id, ss := range s.sessions {
		if now.After(ss.expires) {
			delete(s.sessions, id)
		}
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
