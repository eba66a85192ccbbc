package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Client calls a loopd's control plane over its unix socket or, with a
// token, over TCP.
type Client struct {
	base  string
	token string
	hc    *http.Client
	where string
}

// ErrUnreachable: no daemon answers at the socket or address.
var ErrUnreachable = errors.New("loopd is not reachable")

// maxSocketPath is the longest unix socket path every platform accepts
// (sun_path is 104 bytes on macOS and the BSDs, 108 on Linux, with the NUL).
const maxSocketPath = 103

// NewSocketClient talks to the daemon listening on the unix socket path.
func NewSocketClient(path string) *Client {
	tr := &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			if len(path) > maxSocketPath {
				// The kernel refuses such a path with a bare "invalid
				// argument"; say what is wrong and how to fix it.
				return nil, fmt.Errorf("the socket path is %d bytes, more than the %d a unix socket path may have: use a shorter state root (--state-root, state.root)", len(path), maxSocketPath)
			}
			var d net.Dialer
			return d.DialContext(ctx, "unix", path)
		},
		MaxIdleConns:    4,
		IdleConnTimeout: 30 * time.Second,
	}
	return &Client{base: "http://loopd", hc: &http.Client{Transport: tr}, where: "the socket " + path}
}

// NewTCPClient talks to baseURL (http://host:port) with a bearer token.
func NewTCPClient(baseURL, token string, hc *http.Client) *Client {
	if hc == nil {
		hc = &http.Client{}
	}
	return &Client{base: strings.TrimRight(baseURL, "/"), token: token, hc: hc, where: baseURL}
}

// APIError is a non-2xx answer.
type APIError struct {
	Status int
	Detail string
}

func (e *APIError) Error() string { return fmt.Sprintf("loopd answered %d: %s", e.Status, e.Detail) }

// Raw calls method path (under /api/v1, with query) with body (nil: none)
// and returns the answer's bytes. A non-2xx answer is an *APIError.
func (c *Client) Raw(ctx context.Context, method, path string, query url.Values, body any) ([]byte, error) {
	u := c.base + Prefix + path
	if len(query) > 0 {
		u += "?" + query.Encode()
	}
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, err
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, u, rd)
	if err != nil {
		return nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, fmt.Errorf("%w at %s (is `loopd run` running with this state root?): %v", ErrUnreachable, c.where, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return nil, err
	}
	if resp.StatusCode/100 != 2 {
		var d struct {
			Detail string `json:"detail"`
		}
		if json.Unmarshal(data, &d) != nil || d.Detail == "" {
			d.Detail = strings.TrimSpace(string(data))
		}
		return nil, &APIError{Status: resp.StatusCode, Detail: d.Detail}
	}
	return data, nil
}

// Do calls like Raw and decodes the answer into out (nil: discarded).
func (c *Client) Do(ctx context.Context, method, path string, query url.Values, body, out any) error {
	data, err := c.Raw(ctx, method, path, query, body)
	if err != nil || out == nil {
		return err
	}
	if err := json.Unmarshal(data, out); err != nil {
		return fmt.Errorf("loopd's answer to %s %s: %w", method, path, err)
	}
	return nil
}
