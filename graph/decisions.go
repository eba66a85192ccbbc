package graph

import (
	"context"
	"time"
)

// Signed decisions (docs/decisions.md §16). graph-state.json is written
// by the agent's checkout as much as by theloop, so a recorded human verdict
// counts only with proof of who made it. The kernel does no cryptography and
// no I/O here: it hands the record to a DecisionSigner when a gate resolves
// and asks a DecisionVerifier before honouring one. Package loop implements
// both with Ed25519.

// DecisionSubject is what a signature binds a decision to: one gate of one
// loop of one work item. Ref (the provider-qualified name, e.g.
// "github:owner/repo#7") keeps a decision of one repository from being
// replayed in another that has a work item of the same id.
type DecisionSubject struct {
	WorkItem string `json:"workItem"`
	Ref      string `json:"ref"`
	Loop     string `json:"loop"`
	Gate     string `json:"gate"`
}

// ArtifactHash is the content hash of an artifact a decision approved,
// taken when the decision was recorded (after the lock was written).
type ArtifactHash struct {
	// Name is relative to the spec directory, e.g. "design.md".
	Name   string `json:"name"`
	SHA256 string `json:"sha256"`
}

// DecisionSignature proves a decision: the signing key, the subject signed
// over, and the signature. Its encoding is the signer's.
type DecisionSignature struct {
	// Key names the public key, e.g. "ed25519:<base64>".
	Key     string          `json:"key"`
	Subject DecisionSubject `json:"subject"`
	Sig     string          `json:"sig"`
}

// DecisionSigner signs a decision when the runtime records it from an
// inbound event. It must fill d.Artifacts with the content hashes of gated
// (names relative to the spec directory, read through arts) and set
// d.Signature over sub and every provenance field of d. It must not change
// d's verdict fields. An error leaves the decision recorded unsigned (which
// verifiers refuse) and is reported as a warning.
type DecisionSigner interface {
	SignDecision(ctx context.Context, sub DecisionSubject, arts Artifacts, gated []string, d *Decision) error
}

// DecisionVerifier decides whether a recorded decision counts. It returns nil
// for a decision signed by a trusted key over sub whose artifact hashes
// still match arts, and otherwise an error wrapping one of the
// ErrDecision… sentinels, whose text names the file, gate or key and is
// shown to people (and to the agent): it must not quote record contents
// other than ids, names, hashes and keys. It must not write.
type DecisionVerifier interface {
	VerifyDecision(ctx context.Context, sub DecisionSubject, arts Artifacts, d Decision) error
}

// DecisionRef names a decision in the front matter of the artifacts it
// locked: "<gate>/<comment id>", or "<gate>@<recorded at>" when no comment
// is known; at is the instant the decision is recorded (a chain's
// HookContext.Now). lock-artifacts writes it; DecisionVerdict.Ref reads it
// back.
func DecisionRef(gate, comment string, at time.Time) string {
	return decisionRef(gate, comment, timestamp(at))
}

// decisionRef is DecisionRef with the recorded instant as graph-state.json
// holds it.
func decisionRef(gate, comment, at string) string {
	if comment != "" {
		return gate + "/" + comment
	}
	return gate + "@" + at
}

// Decision verdicts reported by Runtime.VerifyDecisions.
const (
	DecisionVerified   = "verified"
	DecisionUnverified = "unverified"
	DecisionRefused    = "refused"
)

// DecisionVerdict is one recorded decision and whether it counts.
type DecisionVerdict struct {
	Gate       string         `json:"gate"`
	Outcome    string         `json:"outcome"`
	By         string         `json:"by"`
	At         string         `json:"at"`
	Comment    string         `json:"comment,omitempty"`
	CommentURL string         `json:"commentUrl,omitempty"`
	Key        string         `json:"key,omitempty"`
	Artifacts  []ArtifactHash `json:"artifacts,omitempty"`
	// Verdict is verified, refused, or unverified (no verifier configured).
	Verdict string `json:"verdict"`
	// Reason explains a refusal.
	Reason string `json:"reason,omitempty"`
	// Err is the verifier's error (nil unless refused).
	Err error `json:"-"`
	// Ref is how the front matter of the artifacts this decision locked
	// names it (see DecisionRef).
	Ref string `json:"-"`
}

// VerifyDecisions reports every recorded decision of the work item with the
// configured verifier's verdict (unverified when none is configured). It
// takes no lock and writes nothing.
func (r *Runtime) VerifyDecisions(ctx context.Context, id string) ([]DecisionVerdict, error) {
	s, err := r.open(ctx, id, missingFresh)
	if err != nil {
		return nil, err
	}
	out := make([]DecisionVerdict, 0, s.st.Decisions.Len())
	for _, key := range s.st.Decisions.Keys() {
		d, _ := s.st.Decisions.Get(key)
		v := DecisionVerdict{Gate: key, Outcome: d.Outcome, By: d.By, At: d.At, Comment: d.Comment, CommentURL: d.CommentURL, Artifacts: d.Artifacts, Verdict: DecisionUnverified, Ref: decisionRef(key, d.Comment, d.At)}
		if d.Signature != nil {
			v.Key = d.Signature.Key
		}
		if r.opts.Verifier != nil {
			if err := r.verify(ctx, s, key); err != nil {
				v.Verdict, v.Reason, v.Err = DecisionRefused, err.Error(), err
			} else {
				v.Verdict = DecisionVerified
			}
		}
		out = append(out, v)
	}
	return out, nil
}

// Verifies reports whether the runtime checks recorded decisions.
func (r *Runtime) Verifies() bool { return r.opts.Verifier != nil }

// subject is the DecisionSubject of gate key in this session.
func (r *Runtime) subject(s *session, key string) DecisionSubject {
	return DecisionSubject{WorkItem: s.wi.ID, Ref: s.wi.Ref, Loop: r.g.Name, Gate: key}
}

// verify returns the verifier's verdict on decision key, memoised for the
// verb (nil without a verifier).
func (r *Runtime) verify(ctx context.Context, s *session, key string) error {
	if r.opts.Verifier == nil {
		return nil
	}
	if err, ok := s.verdicts[key]; ok {
		return err
	}
	d, ok := s.st.Decisions.Get(key)
	if !ok {
		return nil
	}
	err := r.opts.Verifier.VerifyDecision(ctx, r.subject(s, key), s.arts, d)
	if s.verdicts == nil {
		s.verdicts = map[string]error{}
	}
	s.verdicts[key] = err
	return err
}

// refused is the outcome of a human gate whose recorded decision the
// verifier refuses: a block that names why, so that CI fails on it and the
// agent is told the record does not count.
func refused(n *Node, err error) ChainOutcome {
	res := Block(Message{Text: "the recorded decision of " + n.ID + " is refused: " + err.Error() + " — a gate is passed only by an authorized person's comment, recorded and signed by theloop", Severity: SeverityError})
	res.Retriable = false
	res.Hook = "(recorded decision)"
	return ChainOutcome{Status: StatusBlock, Results: []HookResult{res}, Blocking: 0}
}

// gatedNames collects the artifact names the chain locked (lock-artifacts'
// data "locked"), which the signer hashes.
func gatedNames(c ChainOutcome) []string {
	var out []string
	seen := map[string]bool{}
	for _, res := range c.Results {
		for _, n := range AsStrings(res.Data["locked"]) {
			if !seen[n] {
				seen[n] = true
				out = append(out, n)
			}
		}
	}
	return out
}

// sign signs the decision just recorded under key, when a signer is
// configured. A failure is a warning: the decision stays recorded, unsigned.
func (r *Runtime) sign(ctx context.Context, s *session, key string, gated []string, ev *Event) {
	if r.opts.Signer == nil {
		return
	}
	d, ok := s.st.Decisions.Get(key)
	if !ok {
		return
	}
	if ev != nil && d.CommentURL == "" {
		for _, c := range ev.Comments {
			if c.ID != "" && c.ID == d.Comment {
				d.CommentURL = c.URL
			}
		}
	}
	if err := r.opts.Signer.SignDecision(ctx, r.subject(s, key), s.arts, gated, &d); err != nil {
		s.warn = append(s.warn, "the decision of "+key+" could not be signed: "+err.Error()+"; verifiers will refuse it")
		r.emit(s, EventDecisionUnsigned, LevelWarning, Field{"node", key}, Field{"error", err.Error()})
		return
	}
	s.st.Decisions.Set(key, d)
}
