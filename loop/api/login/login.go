// Package login is the dashboard's login handshake without the dashboard:
// the login file a running loopd writes under its state root (URL and
// key, 0600) and the one-time tokens minted from it. `loopctl dashboard`
// uses it to print a login URL, so it imports std and atomicfile only —
// not html/template, not the dashboard's pages (internal/layering checks
// what loopctl links).
package login

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/internal/atomicfile"
)

// TTL bounds how long a one-time login URL is valid.
const TTL = 5 * time.Minute

// File is the login file's name under the state root, through which `loopctl
// dashboard` reaches a running loopd's dashboard: the dashboard's URL and a
// random login key, written 0600 (directory 0700) when the dashboard starts
// and removed when it stops. Whoever can read it can log in — the same
// user that can read the state root.
const File = "dashboard.json"

// Errors of the login file and tokens.
var (
	// ErrNoDashboard: no running loopd has written the login file.
	ErrNoDashboard = errors.New("no running loopd dashboard (its login file is missing)")
	// ErrBadToken: the login token is malformed, forged, expired or used.
	ErrBadToken = errors.New("login token is invalid, expired or already used")
)

// fileFormat is File's format.
type fileFormat struct {
	URL string `json:"url"`
	Key string `json:"key"`
	PID int    `json:"pid"`
}

// WriteFile writes the login file for a dashboard at baseURL with key.
func WriteFile(stateRoot, baseURL string, key []byte) error {
	if err := os.MkdirAll(stateRoot, 0o700); err != nil {
		return err
	}
	b, err := json.Marshal(fileFormat{URL: baseURL, Key: hex.EncodeToString(key), PID: os.Getpid()})
	if err != nil {
		return err
	}
	return atomicfile.Write(filepath.Join(stateRoot, File), b, 0o600)
}

// RemoveFile removes the login file if it is ours (same key).
func RemoveFile(stateRoot string, key []byte) {
	p := filepath.Join(stateRoot, File)
	if lf, err := readFile(p); err == nil && lf.Key == hex.EncodeToString(key) {
		_ = os.Remove(p)
	}
}

func readFile(p string) (fileFormat, error) {
	var lf fileFormat
	fi, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return lf, fmt.Errorf("%w: %s; start loopd (loopd run) with the same state root", ErrNoDashboard, p)
	}
	if err != nil {
		return lf, err
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return lf, fmt.Errorf("dashboard: %s is readable by others (mode %v); refusing it — loopd writes it 0600", p, fi.Mode().Perm())
	}
	if fi.Size() > 4096 {
		return lf, fmt.Errorf("dashboard: %s is too large to be a login file", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return lf, err
	}
	if err := json.Unmarshal(b, &lf); err != nil || lf.URL == "" || len(lf.Key) != 64 {
		return lf, fmt.Errorf("dashboard: %s is not a login file loopd wrote", p)
	}
	return lf, nil
}

// URL reads the login file under stateRoot and mints a one-time login
// URL valid for TTL: <url>/login?token=<nonce>.<expiry>.<hmac>. It
// talks to nobody: the dashboard checks the MAC with the same key and
// accepts each nonce once.
func URL(stateRoot string, now time.Time) (string, error) {
	lf, err := readFile(filepath.Join(stateRoot, File))
	if err != nil {
		return "", err
	}
	key, err := hex.DecodeString(lf.Key)
	if err != nil {
		return "", fmt.Errorf("dashboard: login file key: %w", err)
	}
	return strings.TrimSuffix(lf.URL, "/") + "/login?token=" + url.QueryEscape(Mint(key, now)), nil
}

// Mint returns a one-time login token under key valid until
// now+TTL.
func Mint(key []byte, now time.Time) string {
	var nonce [16]byte
	_, _ = rand.Read(nonce[:])
	body := hex.EncodeToString(nonce[:]) + "." + strconv.FormatInt(now.Add(TTL).Unix(), 10)
	return body + "." + MAC(key, body)
}

// MAC is the token's signature over body (nonce.expiry) under key: what
// Mint appends and the dashboard checks.
func MAC(key []byte, body string) string {
	m := hmac.New(sha256.New, key)
	m.Write([]byte("theloop-dashboard-login\x00" + body))
	return hex.EncodeToString(m.Sum(nil))
}
