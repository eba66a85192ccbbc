package githubsim

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
)

// Who may approve, as GitHub answers it: team memberships, collaborators'
// roles and the repository's files (CODEOWNERS), each settable from a
// test and served on GitHub's endpoints.

type authzState struct {
	teams map[string]map[string]string // lower org/slug → login → role (member, maintainer)
	perms map[string]map[string]string // lower owner/repo → login → role_name
	files map[string]map[string]string // lower owner/repo → path → content (default branch)
}

func (s *Server) authz() *authzState {
	if s.az == nil {
		s.az = &authzState{teams: map[string]map[string]string{}, perms: map[string]map[string]string{}, files: map[string]map[string]string{}}
	}
	return s.az
}

// SetTeam makes members the members of team org/slug (replacing any).
func (s *Server) SetTeam(org, slug string, members ...string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m := map[string]string{}
	for _, l := range members {
		m[l] = "member"
	}
	s.authz().teams[strings.ToLower(org+"/"+slug)] = m
}

// RemoveTeamMember takes login out of team org/slug.
func (s *Server) RemoveTeamMember(org, slug, login string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.authz().teams[strings.ToLower(org+"/"+slug)], login)
}

// SetPermission gives login role (admin, maintain, write, triage, read;
// "" removes it) on repository full.
func (s *Server) SetPermission(full, login, role string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := strings.ToLower(full)
	if s.authz().perms[k] == nil {
		s.authz().perms[k] = map[string]string{}
	}
	if role == "" {
		delete(s.authz().perms[k], login)
		return
	}
	s.authz().perms[k][login] = role
}

// PutFile writes path on the repository's default branch.
func (s *Server) PutFile(full, path, content string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := strings.ToLower(full)
	if s.authz().files[k] == nil {
		s.authz().files[k] = map[string]string{}
	}
	s.authz().files[k][path] = content
}

func (s *Server) authzRoutes(add func(method, pattern string, h http.HandlerFunc)) {
	add("GET", "/orgs/{org}/teams/{team}/memberships/{login}", s.getMembership)
	add("GET", "/repos/{o}/{r}/collaborators/{login}/permission", s.withRepo(s.getPermission))
	for depth := 1; depth <= 8; depth++ {
		pattern := "/repos/{o}/{r}/contents"
		for i := range depth {
			pattern += fmt.Sprintf("/{p%d}", i)
		}
		add("GET", pattern, s.withRepo(s.getContents(depth)))
	}
}

func (s *Server) getMembership(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	org, team, login := r.PathValue("org"), r.PathValue("team"), r.PathValue("login")
	role, ok := s.authz().teams[strings.ToLower(org+"/"+team)][login]
	if !ok {
		notFound(w)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"url":   fmt.Sprintf("%s/organizations/%d/team/%d/memberships/%s", s.apiURL(), userID(org), userID(org+"/"+team), login),
		"role":  role,
		"state": "active",
	})
}

func (s *Server) getPermission(w http.ResponseWriter, r *http.Request, rp *repo) {
	login := r.PathValue("login")
	role, ok := s.authz().perms[strings.ToLower(rp.full())][login]
	if !ok {
		if login == rp.owner {
			role = "admin"
		} else {
			notFound(w) // GitHub: "is not a user" / not a collaborator
			return
		}
	}
	legacy := role
	switch role {
	case "maintain":
		legacy = "write"
	case "triage":
		legacy = "read"
	}
	u := s.userJSON(login)
	u["permissions"] = map[string]any{"admin": role == "admin", "maintain": role == "admin" || role == "maintain",
		"push": legacy == "write" || legacy == "admin", "triage": role != "read", "pull": true}
	u["role_name"] = role
	writeJSON(w, http.StatusOK, map[string]any{"permission": legacy, "role_name": role, "user": u})
}

func (s *Server) getContents(depth int) func(http.ResponseWriter, *http.Request, *repo) {
	return func(w http.ResponseWriter, r *http.Request, rp *repo) {
		parts := make([]string, depth)
		for i := range depth {
			parts[i] = r.PathValue(fmt.Sprintf("p%d", i))
		}
		path := strings.Join(parts, "/")
		if ref := r.URL.Query().Get("ref"); ref != "" && ref != rp.defaultBranch() {
			notFound(w) // only the default branch is modelled
			return
		}
		content, ok := s.authz().files[strings.ToLower(rp.full())][path]
		if !ok {
			notFound(w)
			return
		}
		api := fmt.Sprintf("%s/repos/%s/contents/%s", s.apiURL(), rp.full(), path)
		sha := fmt.Sprintf("%040x", userID(path+"\x00"+content))
		web := fmt.Sprintf("%s/%s/blob/%s/%s", s.cfg.WebURL, rp.full(), rp.defaultBranch(), path)
		writeJSON(w, http.StatusOK, map[string]any{
			"type": "file", "encoding": "base64", "size": len(content), "name": parts[depth-1], "path": path,
			"content": base64.StdEncoding.EncodeToString([]byte(content)), "sha": sha,
			"url": api, "git_url": s.apiURL() + "/repos/" + rp.full() + "/git/blobs/" + sha, "html_url": web,
			"download_url": "https://raw.githubusercontent.com/" + rp.full() + "/" + rp.defaultBranch() + "/" + path,
			"_links":       map[string]any{"self": api, "git": s.apiURL() + "/repos/" + rp.full() + "/git/blobs/" + sha, "html": web},
		})
	}
}
