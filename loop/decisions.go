package loop

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/theloop-dev/theloop/graph"
	"github.com/theloop-dev/theloop/run"
)

// Signed gate decisions (docs/decisions.md §16), with Ed25519.
//
// The signing key lives under the operator's or daemon's state root
// (<state root>/keys/decision-signing.key, 0600) and never in a repository.
// Its public half is the trust anchor of every verifier: given on the
// command line (--trust-key), in the environment (THE_LOOP_TRUST_KEYS, a CI
// variable) or committed to the base branch as .the-loop/trusted-keys and
// read from there with git (never from the working tree, which the agent
// writes). Several keys may be trusted at once, so keys can be rotated.
//
// Limit: file permissions keep the key from other users, not from processes
// of the same user. An agent session running as the daemon's user can read
// it; run loopd (and keep its state root) under a user of its own to close
// that path.

// Key and trust-anchor names.
const (
	// KeyPrefix starts the text form of a public key: "ed25519:<base64>".
	KeyPrefix = "ed25519:"
	// SigningKeyFile is the private key's path under the state root.
	SigningKeyFile = "keys/decision-signing.key"
	// TrustedKeysFile is the committed trust anchor, read from the base
	// branch only.
	TrustedKeysFile = ".the-loop/trusted-keys"
	// TrustKeysEnv holds trusted public keys (whitespace- or
	// comma-separated), e.g. a CI variable.
	TrustKeysEnv = "THE_LOOP_TRUST_KEYS"
	// TrustBaseEnv names a git revision whose .the-loop/trusted-keys is
	// trusted (e.g. origin/main), for the Stop hook and CI.
	TrustBaseEnv = "THE_LOOP_TRUST_BASE"
	// privateKeyPrefix starts the private key file's one line.
	privateKeyPrefix = "theloop-ed25519-seed:"
)

// Sentinel errors of key handling. Compare with errors.Is.
var (
	// ErrNoSigningKey: the state root holds no signing key.
	ErrNoSigningKey = errors.New("no decision-signing key")
	// ErrBadKey: a key that does not parse, or a key file with unsafe
	// permissions or location.
	ErrBadKey = errors.New("unusable key")
	// ErrNoTrustAnchor: a trust source was named but yields no key.
	ErrNoTrustAnchor = errors.New("trust anchor names no key")
)

// FormatPublicKey renders a public key as "ed25519:<base64>".
func FormatPublicKey(pub ed25519.PublicKey) string {
	return KeyPrefix + base64.StdEncoding.EncodeToString(pub)
}

// ParsePublicKey reads "ed25519:<base64>".
func ParsePublicKey(s string) (ed25519.PublicKey, error) {
	b64, ok := strings.CutPrefix(strings.TrimSpace(s), KeyPrefix)
	if !ok {
		return nil, fmt.Errorf("%w: %q does not start with %q", ErrBadKey, short(s), KeyPrefix)
	}
	raw, err := base64.StdEncoding.DecodeString(b64)
	if err != nil || len(raw) != ed25519.PublicKeySize {
		return nil, fmt.Errorf("%w: %q is not a base64 Ed25519 public key (32 bytes)", ErrBadKey, short(s))
	}
	return ed25519.PublicKey(raw), nil
}

func short(s string) string {
	if len(s) > 60 {
		return s[:60] + "…"
	}
	return s
}

// ParseTrustedKeys reads a trust anchor's text: keys separated by
// whitespace, commas or newlines; "#" starts a comment to the end of the
// line; a word after a key on its line (a label) is ignored. Every key must
// parse.
func ParseTrustedKeys(text string) ([]ed25519.PublicKey, error) {
	var keys []ed25519.PublicKey
	for _, line := range strings.Split(text, "\n") {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		for _, tok := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' }) {
			if !strings.HasPrefix(tok, KeyPrefix) {
				continue // a label
			}
			k, err := ParsePublicKey(tok)
			if err != nil {
				return nil, err
			}
			keys = append(keys, k)
		}
	}
	return keys, nil
}

// --- signing key ---------------------------------------------------------------

// SigningKeyPath is the signing key's file under stateRoot.
func SigningKeyPath(stateRoot string) string {
	return filepath.Join(stateRoot, filepath.FromSlash(SigningKeyFile))
}

// InitSigningKey creates the signing key under stateRoot (directory 0700,
// file 0600, never through a symbolic link). It refuses a state root inside
// a git checkout — the key must never be committed, and an agent must not
// read it. When a key exists it is kept and created is false.
func InitSigningKey(stateRoot string) (pub string, created bool, err error) {
	abs, err := filepath.Abs(stateRoot)
	if err != nil {
		return "", false, err
	}
	if repo := enclosingRepo(abs); repo != "" {
		return "", false, fmt.Errorf("%w: the state root %s is inside the git checkout %s; a signing key must never be in a repository — pass --state-root (or set THE_LOOP_STATE_ROOT) to a directory outside it, e.g. ~/.the-loop", ErrBadKey, abs, repo)
	}
	if s, err := LoadSigningKey(abs); err == nil {
		return s.PublicKey(), false, nil
	} else if !errors.Is(err, ErrNoSigningKey) {
		return "", false, err
	}
	path := SigningKeyPath(abs)
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return "", false, fmt.Errorf("creating %s: %w", filepath.Dir(path), err)
	}
	pubKey, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", false, err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|oNoFollow, 0o600)
	if err != nil {
		return "", false, fmt.Errorf("creating %s: %w", path, err)
	}
	line := privateKeyPrefix + base64.StdEncoding.EncodeToString(priv.Seed()) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		os.Remove(path)
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return "", false, fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return "", false, err
	}
	return FormatPublicKey(pubKey), true, nil
}

// enclosingRepo returns the git checkout dir is inside ("" if none).
// EnclosingCheckout returns the root of the git checkout that holds dir
// (dir made absolute; a .git file or directory in dir or above), or "".
func EnclosingCheckout(dir string) string {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return ""
	}
	return enclosingRepo(abs)
}

func enclosingRepo(dir string) string {
	for d := dir; ; {
		if _, err := os.Lstat(filepath.Join(d, ".git")); err == nil {
			return d
		}
		parent := filepath.Dir(d)
		if parent == d {
			return ""
		}
		d = parent
	}
}

// LoadSigningKey reads the signing key under stateRoot. A missing file
// wraps ErrNoSigningKey; a link, a file others can read, or bad contents
// wrap ErrBadKey.
func LoadSigningKey(stateRoot string) (*Signer, error) {
	path := SigningKeyPath(stateRoot)
	f, err := os.OpenFile(path, os.O_RDONLY|oNoFollow|oNonBlock, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w at %s; create one with `loopctl keys init`", ErrNoSigningKey, path)
	}
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %v (it must be a regular file, not a link)", ErrBadKey, path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() || st.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("%w: %s has mode %v; it must be a regular file only its owner can read (chmod 600)", ErrBadKey, path, st.Mode())
	}
	buf := make([]byte, 256)
	n, _ := f.Read(buf)
	b64, ok := strings.CutPrefix(strings.TrimSpace(string(buf[:n])), privateKeyPrefix)
	seed, derr := base64.StdEncoding.DecodeString(b64)
	if !ok || derr != nil || len(seed) != ed25519.SeedSize {
		return nil, fmt.Errorf("%w: %s is not a theloop signing key; move it aside and run `loopctl keys init`", ErrBadKey, path)
	}
	return NewSigner(ed25519.NewKeyFromSeed(seed)), nil
}

// --- signer and verifier -----------------------------------------------------

// Signer signs gate decisions with an Ed25519 key: a graph.DecisionSigner.
// Pass it as Options.DecisionSigner.
type Signer struct {
	key ed25519.PrivateKey
	pub string
}

// NewSigner returns the signer of key.
func NewSigner(key ed25519.PrivateKey) *Signer {
	return &Signer{key: key, pub: FormatPublicKey(key.Public().(ed25519.PublicKey))}
}

// PublicKey returns the public key in text form.
func (s *Signer) PublicKey() string { return s.pub }

// Verifier returns a verifier trusting this signer's key plus others (keys
// being rotated out): what the daemon passes as Options.DecisionVerifier so
// that it, too, honours only decisions it signed.
func (s *Signer) Verifier(others ...ed25519.PublicKey) *Verifier {
	return NewVerifier(append([]ed25519.PublicKey{s.key.Public().(ed25519.PublicKey)}, others...), "the signing key under the state root")
}

// SignDecision implements graph.DecisionSigner: it hashes the gated
// artifacts (SHA-256 of their bytes as they are after the lock) and signs
// the decision's canonical form.
func (s *Signer) SignDecision(_ context.Context, sub graph.DecisionSubject, arts graph.Artifacts, gated []string, d *graph.Decision) error {
	d.Artifacts = nil // a fresh slice: d may share its array with a stored copy
	for _, name := range gated {
		sum, err := hashArtifact(arts, name)
		if err != nil {
			return fmt.Errorf("hashing %s: %w", arts.Path(name), err)
		}
		d.Artifacts = append(d.Artifacts, graph.ArtifactHash{Name: name, SHA256: sum})
	}
	sig := &graph.DecisionSignature{Key: s.pub, Subject: sub}
	msg, err := signedBytes(sig, *d)
	if err != nil {
		return err
	}
	sig.Sig = base64.StdEncoding.EncodeToString(ed25519.Sign(s.key, msg))
	d.Signature = sig
	return nil
}

// maxHashedArtifact bounds an artifact read for hashing.
const maxHashedArtifact = 16 << 20

func hashArtifact(arts graph.Artifacts, name string) (string, error) {
	f, err := arts.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(f, maxHashedArtifact+1))
	if err != nil {
		return "", err
	}
	if n > maxHashedArtifact {
		return "", fmt.Errorf("larger than %d bytes", maxHashedArtifact)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// signedDecision is the canonical form a signature covers: version, key,
// subject and every provenance and verdict field of the decision. Raw JSON
// fields (phase selection's frozen graph, a goal) are covered through the
// hash of their canonical re-encoding, which survives re-indentation and
// escaping by a save.
type signedDecision struct {
	V            int                   `json:"v"`
	Key          string                `json:"key"`
	Subject      graph.DecisionSubject `json:"subject"`
	Outcome      string                `json:"outcome"`
	By           string                `json:"by"`
	Rule         string                `json:"rule,omitempty"`
	At           string                `json:"at"`
	Via          string                `json:"via"`
	Event        string                `json:"event"`
	Comment      string                `json:"comment"`
	CommentURL   string                `json:"commentUrl"`
	Surface      string                `json:"surface"`
	SessionPerPr string                `json:"sessionPerPr"`
	Graph        string                `json:"graph"`
	Goal         string                `json:"goal"`
	Artifacts    []graph.ArtifactHash  `json:"artifacts"`
	Skips        []string              `json:"skips"`
	OptIns       []string              `json:"optIns"`
}

func signedBytes(sig *graph.DecisionSignature, d graph.Decision) ([]byte, error) {
	g, err := canonicalHash(d.Graph)
	if err != nil {
		return nil, err
	}
	goal, err := canonicalHash(d.Goal)
	if err != nil {
		return nil, err
	}
	arts := d.Artifacts
	if arts == nil {
		arts = []graph.ArtifactHash{}
	}
	// Version 2 covers the authorizing rule; a decision without one keeps
	// version 1's form, so decisions signed before rules verify unchanged.
	v := 1
	if d.Rule != "" {
		v = 2
	}
	return json.Marshal(signedDecision{V: v, Rule: d.Rule, Key: sig.Key, Subject: sig.Subject, Outcome: d.Outcome, By: d.By, At: d.At, Via: d.Via,
		Event: d.Event, Comment: d.Comment, CommentURL: d.CommentURL, Surface: d.Surface, SessionPerPr: d.SessionPerPr,
		Graph: g, Goal: goal, Artifacts: arts, Skips: orEmpty(d.Skips), OptIns: orEmpty(d.OptIns)})
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func canonicalHash(raw json.RawMessage) (string, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return "", nil
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", fmt.Errorf("%w: a recorded JSON field does not parse", graph.ErrDecisionBadSignature)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// Verifier checks recorded decisions against trusted public keys: a
// graph.DecisionVerifier. Pass it as Options.DecisionVerifier.
type Verifier struct {
	keys   map[string]ed25519.PublicKey
	source string
}

// NewVerifier trusts keys; source says where they came from (for messages).
func NewVerifier(keys []ed25519.PublicKey, source string) *Verifier {
	v := &Verifier{keys: map[string]ed25519.PublicKey{}, source: source}
	for _, k := range keys {
		v.keys[FormatPublicKey(k)] = k
	}
	return v
}

// Source describes where the trusted keys came from.
func (v *Verifier) Source() string { return v.source }

// Len is the number of trusted keys.
func (v *Verifier) Len() int { return len(v.keys) }

// VerifyDecision implements graph.DecisionVerifier.
func (v *Verifier) VerifyDecision(_ context.Context, sub graph.DecisionSubject, arts graph.Artifacts, d graph.Decision) error {
	sig := d.Signature
	if sig == nil || sig.Sig == "" {
		return fmt.Errorf("%w: the decision of %s carries no signature", graph.ErrDecisionUnsigned, sub.Gate)
	}
	pub, ok := v.keys[sig.Key]
	if !ok {
		return fmt.Errorf("%w: the decision of %s is signed by %s, which is not one of the %d trusted key(s) from %s", graph.ErrDecisionUnknownKey, sub.Gate, short(sig.Key), len(v.keys), v.source)
	}
	raw, err := base64.StdEncoding.DecodeString(sig.Sig)
	if err != nil || len(raw) != ed25519.SignatureSize {
		return fmt.Errorf("%w: the signature of the decision of %s is not an Ed25519 signature", graph.ErrDecisionBadSignature, sub.Gate)
	}
	msg, err := signedBytes(sig, d)
	if err != nil {
		return err
	}
	if !ed25519.Verify(pub, msg, raw) {
		return fmt.Errorf("%w: the decision of %s does not match its signature — the record was edited after it was signed", graph.ErrDecisionBadSignature, sub.Gate)
	}
	if sig.Subject != sub {
		return fmt.Errorf("%w: the decision recorded under %s was signed for work item %s (%s), loop %s, gate %s — not for %s, loop %s, gate %s", graph.ErrDecisionReplayed,
			sub.Gate, sig.Subject.WorkItem, sig.Subject.Ref, sig.Subject.Loop, sig.Subject.Gate, sub.WorkItem, sub.Loop, sub.Gate)
	}
	for _, a := range d.Artifacts {
		sum, err := hashArtifact(arts, a.Name)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%w: %s was approved at %s and has been removed since", graph.ErrDecisionStale, arts.Path(a.Name), sub.Gate)
		case err != nil:
			return fmt.Errorf("%w: %s, approved at %s, cannot be read (%v)", graph.ErrDecisionStale, arts.Path(a.Name), sub.Gate, err)
		case sum != a.SHA256:
			return fmt.Errorf("%w: %s changed after it was approved at %s (approved sha256 %.12s…, now %.12s…); the approval no longer stands — revert the change or ask for a new review", graph.ErrDecisionStale, arts.Path(a.Name), sub.Gate, a.SHA256, sum)
		}
	}
	return nil
}

// --- trust anchors -------------------------------------------------------------

// TrustSource says where to find the trusted keys. The working tree's
// .the-loop/trusted-keys is deliberately not a source: the agent writes it.
type TrustSource struct {
	// Keys are keys given on the command line (--trust-key).
	Keys []string
	// Env is the value of THE_LOOP_TRUST_KEYS.
	Env string
	// Base is a git revision whose .the-loop/trusted-keys is trusted
	// (--trust-base, THE_LOOP_TRUST_BASE).
	Base string
	// Repo is the checkout git reads Base from.
	Repo string
	// Runner runs git (nil: run.Exec).
	Runner run.Runner
}

// Configured reports whether any source is named.
func (src TrustSource) Configured() bool {
	return len(src.Keys) > 0 || strings.TrimSpace(src.Env) != "" || strings.TrimSpace(src.Base) != ""
}

// LoadVerifier builds the verifier of the named sources (their keys
// together: several keys allow rotation). No source configured returns
// (nil, nil): decisions are honoured unverified, as the-loop does. A source
// that is named but yields no key, or a key that does not parse, is an
// error — fail closed.
func LoadVerifier(ctx context.Context, src TrustSource) (*Verifier, error) {
	if !src.Configured() {
		return nil, nil
	}
	var keys []ed25519.PublicKey
	var from []string
	if len(src.Keys) > 0 {
		ks, err := ParseTrustedKeys(strings.Join(src.Keys, "\n"))
		if err != nil {
			return nil, fmt.Errorf("--trust-key: %w", err)
		}
		if len(ks) == 0 {
			return nil, fmt.Errorf("%w: --trust-key takes keys of the form %s<base64> (`loopctl keys show` prints yours)", ErrNoTrustAnchor, KeyPrefix)
		}
		keys, from = append(keys, ks...), append(from, "--trust-key")
	}
	if strings.TrimSpace(src.Env) != "" {
		ks, err := ParseTrustedKeys(src.Env)
		if err != nil {
			return nil, fmt.Errorf("$%s: %w", TrustKeysEnv, err)
		}
		if len(ks) == 0 {
			return nil, fmt.Errorf("%w: $%s is set but holds no key of the form %s<base64>", ErrNoTrustAnchor, TrustKeysEnv, KeyPrefix)
		}
		keys, from = append(keys, ks...), append(from, "$"+TrustKeysEnv)
	}
	if base := strings.TrimSpace(src.Base); base != "" {
		if strings.HasPrefix(base, "-") || strings.ContainsAny(base, ": \t\n") {
			return nil, fmt.Errorf("%w: %q is not a git revision", ErrNoTrustAnchor, base)
		}
		runner := src.Runner
		if runner == nil {
			runner = run.Exec{}
		}
		// --no-textconv: the file's bytes as committed, whatever an
		// attribute says.
		c := run.Git("-C", src.Repo, "show", "--no-textconv", base+":"+TrustedKeysFile)
		c.Timeout = 10 * time.Second
		res, err := runner.Run(ctx, c)
		if err != nil {
			return nil, fmt.Errorf("%w: reading %s from %s (git show %s:%s): %v", ErrNoTrustAnchor, TrustedKeysFile, base, base, TrustedKeysFile, err)
		}
		ks, err := ParseTrustedKeys(string(res.Stdout))
		if err != nil {
			return nil, fmt.Errorf("%s on %s: %w", TrustedKeysFile, base, err)
		}
		if len(ks) == 0 {
			return nil, fmt.Errorf("%w: %s on %s holds no key", ErrNoTrustAnchor, TrustedKeysFile, base)
		}
		keys, from = append(keys, ks...), append(from, TrustedKeysFile+" on "+base)
	}
	return NewVerifier(keys, strings.Join(from, " + ")), nil
}

// UnverifiedWarning is the one line printed per run when no trust anchor is
// configured.
const UnverifiedWarning = "recorded gate decisions are NOT verified: no trust anchor is configured (--trust-key, $" + TrustKeysEnv + " or --trust-base/$" + TrustBaseEnv + "); anyone who can write graph-state.json can pass a gate"

var (
	_ graph.DecisionSigner   = (*Signer)(nil)
	_ graph.DecisionVerifier = (*Verifier)(nil)
)
