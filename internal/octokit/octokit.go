// Package octokit holds theloop's GitHub code to GitHub's own published
// description, for contract tests: @octokit/openapi (the OpenAPI
// description of api.github.com) and @octokit/webhooks-examples (example
// payloads of every webhook event), both installed from npm by .ci/run into
// its tools cache. It only reads those files; it is test support, linked by
// no binary.
package octokit

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/xeipuuv/gojsonschema"
)

// Environment variables .ci/run exports, naming the installed files.
const (
	// OpenAPIEnv names api.github.com.json of @octokit/openapi.
	OpenAPIEnv = "THELOOP_OCTOKIT_OPENAPI"
	// WebhooksEnv names api.github.com/index.json of
	// @octokit/webhooks-examples.
	WebhooksEnv = "THELOOP_WEBHOOKS_EXAMPLES"
)

// cacheDir is where .ci/run installs the packages when the variables are
// not set (a developer who ran .ci/run once).
func cacheDir() string {
	if d := os.Getenv("THELOOP_TOOLS_CACHE"); d != "" {
		return filepath.Join(d, "octokit")
	}
	base := os.Getenv("XDG_CACHE_HOME")
	if base == "" {
		home, _ := os.UserHomeDir()
		base = filepath.Join(home, ".cache")
	}
	return filepath.Join(base, "theloop-ci", "octokit")
}

// OpenAPIFile is the description's path, and whether it exists.
func OpenAPIFile() (string, bool) {
	return find(OpenAPIEnv, "node_modules/@octokit/openapi/generated/api.github.com.json")
}

// WebhooksFile is the examples' path, and whether it exists.
func WebhooksFile() (string, bool) {
	return find(WebhooksEnv, "node_modules/@octokit/webhooks-examples/api.github.com/index.json")
}

func find(env, rel string) (string, bool) {
	p := os.Getenv(env)
	if p == "" {
		p = filepath.Join(cacheDir(), filepath.FromSlash(rel))
	}
	fi, err := os.Stat(p)
	return p, err == nil && fi.Mode().IsRegular()
}

// SkipReason says why a contract test cannot run, for t.Skip.
func SkipReason(what, env string) string {
	return fmt.Sprintf("%s is not installed (run .ci/run, which installs it with npm into %s, or set %s): the contract test is skipped", what, cacheDir(), env)
}

// Spec is GitHub's REST description.
type Spec struct {
	doc map[string]any
	ops []*Operation

	mu      sync.Mutex
	schemas map[string]*gojsonschema.Schema
}

// Operation is one method on one path template.
type Operation struct {
	ID       string
	Method   string
	Template string
	re       *regexp.Regexp
	literals int
	raw      map[string]any
	spec     *Spec
}

var (
	loadOnce sync.Once
	loaded   *Spec
	loadErr  error
)

// Load reads the description once per process.
func Load(path string) (*Spec, error) {
	loadOnce.Do(func() { loaded, loadErr = load(path) })
	return loaded, loadErr
}

func load(path string) (*Spec, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc map[string]any
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	s := &Spec{doc: doc, schemas: map[string]*gojsonschema.Schema{}}
	paths, _ := doc["paths"].(map[string]any)
	for tmpl, v := range paths {
		item, _ := v.(map[string]any)
		for method, o := range item {
			op, ok := o.(map[string]any)
			if !ok || method == "parameters" {
				continue
			}
			re, lits := templateRegexp(tmpl)
			id, _ := op["operationId"].(string)
			s.ops = append(s.ops, &Operation{ID: id, Method: strings.ToUpper(method), Template: tmpl, re: re, literals: lits, raw: op, spec: s})
		}
	}
	// The most literal template wins (issues/comments/{id} over
	// issues/{issue_number}/…).
	sort.Slice(s.ops, func(i, j int) bool {
		if s.ops[i].literals != s.ops[j].literals {
			return s.ops[i].literals > s.ops[j].literals
		}
		return s.ops[i].Template < s.ops[j].Template
	})
	return s, nil
}

var param = regexp.MustCompile(`\{[^}]+\}`)

func templateRegexp(tmpl string) (*regexp.Regexp, int) {
	lits := 0
	var b strings.Builder
	b.WriteString("^")
	for i, seg := range strings.Split(strings.Trim(tmpl, "/"), "/") {
		b.WriteString("/")
		switch {
		case seg == "{path}" && i > 0:
			b.WriteString(".+") // a file path spans segments
		case param.MatchString(seg):
			last := 0
			for _, m := range param.FindAllStringIndex(seg, -1) {
				b.WriteString(regexp.QuoteMeta(seg[last:m[0]]))
				b.WriteString("[^/]+")
				last = m[1]
			}
			b.WriteString(regexp.QuoteMeta(seg[last:]))
		default:
			lits++
			b.WriteString(regexp.QuoteMeta(seg))
		}
	}
	b.WriteString("$")
	return regexp.MustCompile(b.String()), lits
}

// Match finds the operation serving method on path (relative to the REST
// root, without query).
func (s *Spec) Match(method, path string) (*Operation, bool) {
	for _, op := range s.ops {
		if op.Method == strings.ToUpper(method) && op.re.MatchString(path) {
			return op, true
		}
	}
	return nil, false
}

// pointer resolves a local $ref ("#/components/schemas/x").
func (s *Spec) pointer(ref string) (any, bool) {
	p, ok := strings.CutPrefix(ref, "#/")
	if !ok {
		return nil, false
	}
	var cur any = s.doc
	for _, part := range strings.Split(p, "/") {
		part = strings.ReplaceAll(strings.ReplaceAll(part, "~1", "/"), "~0", "~")
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		cur, ok = m[part]
		if !ok {
			return nil, false
		}
	}
	return cur, true
}

// inline resolves every $ref of v (a cycle becomes the empty schema,
// accepting anything) and turns OpenAPI 3.0's nullable into JSON Schema.
func (s *Spec) inline(v any, stack []string) any {
	switch x := v.(type) {
	case map[string]any:
		if ref, ok := x["$ref"].(string); ok {
			for _, r := range stack {
				if r == ref {
					return map[string]any{}
				}
			}
			t, ok := s.pointer(ref)
			if !ok {
				return map[string]any{}
			}
			return s.inline(t, append(stack, ref))
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			switch k {
			case "example", "examples", "description", "summary", "x-github", "discriminator", "xml", "externalDocs", "deprecated", "readOnly", "writeOnly":
				continue
			}
			out[k] = s.inline(e, stack)
		}
		if out["nullable"] == true {
			delete(out, "nullable")
			if t, ok := out["type"].(string); ok {
				out["type"] = []any{t, "null"}
				if enum, ok := out["enum"].([]any); ok {
					out["enum"] = append(enum, nil)
				}
			} else {
				return map[string]any{"anyOf": []any{out, map[string]any{"type": "null"}}}
			}
		} else {
			delete(out, "nullable")
		}
		return out
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = s.inline(e, stack)
		}
		return out
	}
	return v
}

func (s *Spec) compile(key string, schema any) (*gojsonschema.Schema, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.schemas[key]; ok {
		return c, nil
	}
	c, err := gojsonschema.NewSchema(gojsonschema.NewGoLoader(s.inline(schema, nil)))
	if err != nil {
		return nil, fmt.Errorf("compiling %s: %w", key, err)
	}
	s.schemas[key] = c
	return c, nil
}

// ErrNoSchema: the description declares no JSON schema for what was asked.
var ErrNoSchema = errors.New("octokit: the description declares no JSON schema here")

// ValidateResponse checks a response body against the operation's schema
// for status.
func (op *Operation) ValidateResponse(status int, body []byte) error {
	resps, _ := op.raw["responses"].(map[string]any)
	r, ok := resps[strconv.Itoa(status)]
	if !ok {
		return fmt.Errorf("%s %s (%s) declares no %d response", op.Method, op.Template, op.ID, status)
	}
	r = op.spec.inlineRef(r)
	content, _ := r.(map[string]any)["content"].(map[string]any)
	if len(body) == 0 || strings.TrimSpace(string(body)) == "" {
		if content == nil {
			return nil
		}
	}
	mt, _ := content["application/json"].(map[string]any)
	schema, ok := mt["schema"]
	if !ok {
		if len(strings.TrimSpace(string(body))) == 0 {
			return nil
		}
		if status < 400 {
			return fmt.Errorf("%s %s %d: %w", op.Method, op.Template, status, ErrNoSchema)
		}
		// An error the description lists without a body (a 404 "if the
		// user is not a member"): GitHub answers its basic error.
		schema = map[string]any{"$ref": "#/components/schemas/basic-error"}
	}
	return op.validate(fmt.Sprintf("%s %s %d", op.Method, op.Template, status), schema, body)
}

func (s *Spec) inlineRef(v any) any {
	if m, ok := v.(map[string]any); ok {
		if ref, ok := m["$ref"].(string); ok {
			if t, ok := s.pointer(ref); ok {
				return t
			}
		}
	}
	return v
}

func (op *Operation) validate(key string, schema any, body []byte) error {
	c, err := op.spec.compile(key, schema)
	if err != nil {
		return err
	}
	res, err := c.Validate(gojsonschema.NewBytesLoader(body))
	if err != nil {
		return fmt.Errorf("%s: the body is not JSON: %w", key, err)
	}
	if res.Valid() {
		return nil
	}
	var msgs []string
	for i, e := range res.Errors() {
		if i == 8 {
			msgs = append(msgs, fmt.Sprintf("… %d more", len(res.Errors())-i))
			break
		}
		msgs = append(msgs, e.String())
	}
	return fmt.Errorf("%s does not match GitHub's schema: %s", key, strings.Join(msgs, "; "))
}

// ValidateRequest checks a request's query parameters (each must be
// declared by the operation) and its JSON body against the operation's
// request body schema.
func (op *Operation) ValidateRequest(query url.Values, body []byte) error {
	declared := map[string]bool{}
	params, _ := op.raw["parameters"].([]any)
	for _, p := range params {
		pm, _ := op.spec.inlineRef(p).(map[string]any)
		if pm["in"] == "query" {
			declared[fmt.Sprint(pm["name"])] = true
		}
	}
	for k := range query {
		if !declared[k] {
			return fmt.Errorf("%s %s (%s) declares no query parameter %q", op.Method, op.Template, op.ID, k)
		}
	}
	rb, hasBody := op.raw["requestBody"]
	if len(strings.TrimSpace(string(body))) == 0 {
		if hasBody {
			if req, _ := op.spec.inlineRef(rb).(map[string]any)["required"].(bool); req {
				return fmt.Errorf("%s %s (%s) requires a body; none was sent", op.Method, op.Template, op.ID)
			}
		}
		return nil
	}
	if !hasBody {
		return fmt.Errorf("%s %s (%s) takes no body; one was sent", op.Method, op.Template, op.ID)
	}
	content, _ := op.spec.inlineRef(rb).(map[string]any)["content"].(map[string]any)
	mt, _ := content["application/json"].(map[string]any)
	schema, ok := mt["schema"]
	if !ok {
		return fmt.Errorf("%s %s: %w for the request body", op.Method, op.Template, ErrNoSchema)
	}
	return op.validate(fmt.Sprintf("%s %s request", op.Method, op.Template), schema, body)
}

// Example is one webhook payload of @octokit/webhooks-examples.
type Example struct {
	Event   string
	Action  string
	Payload json.RawMessage
}

// LoadExamples reads the examples of the named events.
func LoadExamples(path string, events ...string) ([]Example, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var doc []struct {
		Name     string            `json:"name"`
		Examples []json.RawMessage `json:"examples"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	want := map[string]bool{}
	for _, e := range events {
		want[e] = true
	}
	var out []Example
	for _, d := range doc {
		if !want[d.Name] {
			continue
		}
		for _, raw := range d.Examples {
			var a struct {
				Action string `json:"action"`
			}
			_ = json.Unmarshal(raw, &a)
			out = append(out, Example{Event: d.Name, Action: a.Action, Payload: raw})
		}
	}
	return out, nil
}
