package integrations

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/theloop-dev/theloop/workitem"
)

// The questions loopd asks GitHub to decide who may approve
// (docs/decisions.md §25): team membership, a collaborator's role, and the
// text of CODEOWNERS. Each is one request; a 404 is an answer (not a
// member, no role, no file), never an error.

// maxFileBytes bounds a file read with get-file.
const maxFileBytes = 1 << 20

func (g *github) teamMembership(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	org, err := argString(args, "org", true)
	if err != nil {
		return nil, err
	}
	team, err := argString(args, "team", true)
	if err != nil {
		return nil, err
	}
	login, err := argString(args, "login", true)
	if err != nil {
		return nil, err
	}
	for k, v := range map[string]string{"org": org, "team": team, "login": login} {
		if !validName(strings.TrimSuffix(v, "[bot]")) {
			return nil, fail(ErrInvalidArgument, "argument %q: %q is not a GitHub name", k, clip(v, 60))
		}
	}
	// repo, when given, is the repository the question is about: a GitHub
	// App finds its installation by it.
	repo, _ := argString(args, "repo", false)
	if repo != "" {
		if _, o, r, err := workitem.ParseRepo(repo); err == nil {
			repo = o + "/" + r
		}
	}
	path := fmt.Sprintf("orgs/%s/teams/%s/memberships/%s", url.PathEscape(org), url.PathEscape(team), url.PathEscape(login))
	resp, err := g.exchange(ctx, st, ghRequest{method: http.MethodGet, path: path, repo: repo}, true)
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		return map[string]any{"state": "none", "role": ""}, nil
	}
	if resp.status/100 != 2 {
		return nil, g.statusFailure(resp, fmt.Sprintf("the membership of %s in team %s/%s", login, org, team))
	}
	var m struct {
		State string `json:"state"`
		Role  string `json:"role"`
	}
	if err := json.Unmarshal(resp.body, &m); err != nil || m.State == "" {
		return nil, fail(ErrTransport, "GitHub's team-membership answer does not parse")
	}
	return map[string]any{"state": m.State, "role": m.Role}, nil
}

func (g *github) collaboratorPermission(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	host, owner, repo, err := g.repoArg(args)
	if err != nil {
		return nil, err
	}
	login, err := argString(args, "login", true)
	if err != nil {
		return nil, err
	}
	if !validName(strings.TrimSuffix(login, "[bot]")) {
		return nil, fail(ErrInvalidArgument, "argument \"login\": %q is not a GitHub login", clip(login, 60))
	}
	path := fmt.Sprintf("repos/%s/%s/collaborators/%s/permission", owner, repo, url.PathEscape(login))
	resp, err := g.exchange(ctx, st, ghRequest{method: http.MethodGet, path: path, host: host}, true)
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		return map[string]any{"permission": "none"}, nil
	}
	if resp.status/100 != 2 {
		return nil, g.statusFailure(resp, fmt.Sprintf("the permission of %s on %s/%s", login, owner, repo))
	}
	var p struct {
		Permission string `json:"permission"`
		RoleName   string `json:"role_name"`
	}
	if err := json.Unmarshal(resp.body, &p); err != nil || p.Permission == "" {
		return nil, fail(ErrTransport, "GitHub's collaborator-permission answer does not parse")
	}
	// role_name distinguishes maintain and triage, which the legacy
	// permission field folds into write and read.
	role := p.RoleName
	switch role {
	case "admin", "maintain", "write", "triage", "read":
	default:
		role = p.Permission
	}
	return map[string]any{"permission": role}, nil
}

func (g *github) getFile(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	host, owner, repo, err := g.repoArg(args)
	if err != nil {
		return nil, err
	}
	p, err := argString(args, "path", true)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(p, "/") || strings.Contains(p, "..") || strings.ContainsAny(p, "?#\x00") {
		return nil, fail(ErrInvalidArgument, "argument \"path\": %q is not a path inside the repository", clip(p, 80))
	}
	ref, err := argString(args, "ref", false)
	if err != nil {
		return nil, err
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		segs[i] = url.PathEscape(s)
	}
	path := fmt.Sprintf("repos/%s/%s/contents/%s", owner, repo, strings.Join(segs, "/"))
	if ref != "" {
		path += "?ref=" + url.QueryEscape(ref)
	}
	resp, err := g.exchange(ctx, st, ghRequest{method: http.MethodGet, path: path, host: host}, true)
	if err != nil {
		return nil, err
	}
	if resp.status == http.StatusNotFound {
		return map[string]any{"found": false, "content": "", "sha": ""}, nil
	}
	if resp.status/100 != 2 {
		return nil, g.statusFailure(resp, fmt.Sprintf("%s in %s/%s", p, owner, repo))
	}
	var f struct {
		Type     string `json:"type"`
		Encoding string `json:"encoding"`
		Content  string `json:"content"`
		SHA      string `json:"sha"`
		Size     int    `json:"size"`
	}
	if err := json.Unmarshal(resp.body, &f); err != nil {
		// A directory answers with an array: not a file.
		return map[string]any{"found": false, "content": "", "sha": ""}, nil
	}
	if f.Type != "file" || f.Size > maxFileBytes {
		return map[string]any{"found": false, "content": "", "sha": ""}, nil
	}
	if f.Encoding != "base64" {
		return nil, fail(ErrTransport, "GitHub answered %s in encoding %q; expected base64", p, clip(f.Encoding, 20))
	}
	b, err := base64.StdEncoding.DecodeString(strings.ReplaceAll(f.Content, "\n", ""))
	if err != nil {
		return nil, fail(ErrTransport, "GitHub's content of %s is not base64", p)
	}
	return map[string]any{"found": true, "content": string(b), "sha": f.SHA}, nil
}

// validName reports whether s is shaped like a GitHub login, organisation
// or team slug: letters, digits, '-', '_' and '.', at most 100, so a value
// never changes the path it is put in.
func validName(s string) bool {
	if s == "" || len(s) > 100 {
		return false
	}
	for _, r := range s {
		if !(r == '-' || r == '_' || r == '.' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9') {
			return false
		}
	}
	return s != "." && s != ".."
}
