package integrations

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/theloop-dev/theloop/graph"
)

// Sentinel errors. Every error this package returns wraps one or more of
// them; compare with errors.Is.
var (
	// ErrInvalidConfig: the integrations block of the CLI config is malformed.
	ErrInvalidConfig = errors.New("invalid integrations configuration")
	// ErrProviderNotConfigured: an operation names a provider the CLI config
	// does not configure.
	ErrProviderNotConfigured = errors.New("integration provider not configured")
	// ErrProviderUnavailable: the provider is configured but its transport
	// cannot be used (no token, no gh on PATH).
	ErrProviderUnavailable = errors.New("integration provider unavailable")
	// ErrUnsupportedOperation: no configured provider implements the
	// operation. It is graph.ErrUnsupportedOperation itself, so hooks, which
	// see only the graph package, can tell a deliberate absence (skip) from
	// an outage; an *Error for an unconfigured provider wraps it too.
	ErrUnsupportedOperation = graph.ErrUnsupportedOperation
	// ErrInvalidArgument: an argument is missing or has the wrong shape.
	ErrInvalidArgument = errors.New("invalid integration argument")
	// ErrInvalidRef: a work-item ref is malformed.
	ErrInvalidRef = errors.New("invalid work-item ref")
	// ErrNoCredentials: the credential a transport needs is not available.
	ErrNoCredentials = errors.New("no credentials")
	// ErrAppInstallation: the GitHub App is not installed on the
	// repository, or its installation is suspended or revoked: no token
	// can be had for it until an administrator acts.
	ErrAppInstallation = errors.New("GitHub App installation unusable")
	// ErrUnauthorized: the service rejected the credentials (HTTP 401).
	ErrUnauthorized = errors.New("credentials rejected")
	// ErrForbidden: the credentials lack permission (HTTP 403, not a rate limit).
	ErrForbidden = errors.New("permission denied")
	// ErrNotFound: the service answered 404, or the object does not exist.
	ErrNotFound = errors.New("not found")
	// ErrRateLimited: the service is rate limiting and the wait does not fit
	// the call's deadline or attempt budget.
	ErrRateLimited = errors.New("rate limited")
	// ErrServer: the service kept answering 5xx.
	ErrServer = errors.New("server error")
	// ErrRejected: the service refused the request (another 4xx, or a
	// service-level error such as Slack's ok:false).
	ErrRejected = errors.New("request rejected")
	// ErrTransport: no answer could be obtained (network error, gh failed
	// without an HTTP response, unparseable answer).
	ErrTransport = errors.New("transport failure")
	// ErrTimeout: the call outlived its timeout or its caller's deadline.
	ErrTimeout = errors.New("integration call timed out")
)

// sentinels lists the errors an *Error may wrap, for classification.
var sentinels = []error{
	ErrInvalidConfig, ErrProviderNotConfigured, ErrProviderUnavailable,
	ErrUnsupportedOperation, ErrInvalidArgument, ErrInvalidRef, ErrNoCredentials, ErrAppInstallation,
	ErrUnauthorized, ErrForbidden, ErrNotFound, ErrRateLimited, ErrServer,
	ErrRejected, ErrTransport, ErrTimeout,
	context.DeadlineExceeded, context.Canceled,
}

// Error is a failed call, as Set.Call returns it. Its text is already
// scrubbed of credentials and names the operation and transport; it wraps
// only sentinel errors (never an underlying error that could carry a secret).
type Error struct {
	Operation graph.Operation
	// Transport is the provider's resolved transport ("api", "cli", ...), or
	// "" when the provider is not configured.
	Transport string
	// Attempts counts the attempts made at the service (0 when the call
	// failed before any: bad arguments, unavailable provider).
	Attempts int
	// Status is the HTTP status of the last answer, 0 when there was none.
	Status int
	msg    string
	kinds  []error
}

// Error implements error.
func (e *Error) Error() string {
	if e.Transport == "" {
		return fmt.Sprintf("%s: %s", e.Operation, e.msg)
	}
	return fmt.Sprintf("%s (%s transport): %s", e.Operation, e.Transport, e.msg)
}

// Unwrap returns the sentinel errors describing the failure.
func (e *Error) Unwrap() []error { return e.kinds }

// failure is the internal error type operations return: a message written
// for an operator plus the sentinels that classify it. final marks a failure
// that retrying cannot cure (no credentials, gh not logged in).
type failure struct {
	kinds  []error
	status int
	msg    string
	final  bool
}

func (f *failure) Error() string   { return f.msg }
func (f *failure) Unwrap() []error { return f.kinds }

func fail(kind error, format string, args ...any) *failure {
	return &failure{kinds: []error{kind}, msg: fmt.Sprintf(format, args...)}
}

func failFinal(kind error, format string, args ...any) *failure {
	f := fail(kind, format, args...)
	f.final = true
	return f
}

// classify returns the sentinels err matches.
func classify(err error) []error {
	var out []error
	for _, s := range sentinels {
		if errors.Is(err, s) {
			out = append(out, s)
		}
	}
	return out
}

// VerifyProblem is one operation a graph needs that the configuration cannot
// perform.
type VerifyProblem struct {
	Operation graph.Operation
	Hook      string
	Provider  string
	Transport string
	// Reason says what is wrong and how to fix it.
	Reason string
	// Err is the sentinel classifying the problem (ErrProviderNotConfigured,
	// ErrProviderUnavailable or ErrUnsupportedOperation), so a caller can,
	// for instance, downgrade an unconfigured optional provider to a warning.
	Err error
}

func (p VerifyProblem) String() string {
	return fmt.Sprintf("hook %q needs %s: %s", p.Hook, p.Operation, p.Reason)
}

// VerifyError lists every operation a graph's hooks need that the configured
// integrations cannot perform. It wraps the sentinel of each problem.
type VerifyError struct {
	Graph    string
	Problems []VerifyProblem
}

// Error implements error.
func (e *VerifyError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "integrations cannot serve graph %q:", e.Graph)
	for _, p := range e.Problems {
		b.WriteString("\n  - ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Unwrap returns the problems' sentinels.
func (e *VerifyError) Unwrap() []error {
	var out []error
	for _, p := range e.Problems {
		out = append(out, p.Err)
	}
	return out
}
