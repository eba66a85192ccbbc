package integrations

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
)

// Webhooks and their deliveries, read by the daemon's reconcile pass:
// GitHub does not retry a failed delivery by itself, but it lists a hook's
// deliveries and redelivers one on request ("Handling failed webhook
// deliveries"). Each operation is exactly one request, so a pass can count
// its calls against a budget. Repository and organization hooks are served
// here, and an App's own hook (/app/hook/deliveries, with the App's JWT,
// when the transport authenticates as the App).

// hookScope reads the repo or org argument: the path prefix of the hook's
// endpoints ("repos/o/r" or "orgs/o"), the host, and a name for errors.
func (g *github) hookScope(args map[string]any) (prefix, host, what string, err error) {
	if args["app"] == true {
		// The App's own webhook: its endpoints name no hook (the App has
		// one) and take the App's JWT (appEndpoint).
		return "app/hook", "", "the GitHub App's webhook", nil
	}
	if _, ok := args["org"]; ok {
		org, err := argString(args, "org", true)
		if err != nil {
			return "", "", "", err
		}
		if !validLogin(org) {
			return "", "", "", fail(ErrInvalidArgument, "argument \"org\": %q is not an organization login", clip(org, 60))
		}
		return "orgs/" + org, "", "organization " + org, nil
	}
	host, owner, repo, err := g.repoArg(args)
	if err != nil {
		return "", "", "", err
	}
	return "repos/" + owner + "/" + repo, host, owner + "/" + repo, nil
}

var loginPattern = regexp.MustCompile(`^[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})$`)

func validLogin(s string) bool { return loginPattern.MatchString(s) }

// positiveIDArg reads a positive integer id argument.
func positiveIDArg(args map[string]any, key string) (int64, error) {
	n, ok, err := argInt(args, key)
	if err != nil {
		return 0, err
	}
	if !ok || n <= 0 {
		return 0, fail(ErrInvalidArgument, "argument %q is required (a positive id)", key)
	}
	return int64(n), nil
}

type ghHook struct {
	ID     int64    `json:"id"`
	Active bool     `json:"active"`
	Events []string `json:"events"`
	Config struct {
		URL string `json:"url"`
	} `json:"config"`
}

func (g *github) listHooks(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	prefix, host, what, err := g.hookScope(args)
	if err != nil {
		return nil, err
	}
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: prefix + "/hooks?per_page=100", host: host}, true, "the webhooks of "+what)
	if err != nil {
		return nil, err
	}
	hs, err := decodeArray[ghHook]("a webhook list", resp.body)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(hs))
	for _, h := range hs {
		events := make([]any, 0, len(h.Events))
		for _, e := range h.Events {
			events = append(events, e)
		}
		out = append(out, map[string]any{"id": int(h.ID), "url": h.Config.URL, "active": h.Active, "events": events})
	}
	return map[string]any{"hooks": out}, nil
}

type ghHookDelivery struct {
	ID          int64  `json:"id"`
	GUID        string `json:"guid"`
	DeliveredAt string `json:"delivered_at"`
	Redelivery  bool   `json:"redelivery"`
	Status      string `json:"status"`
	StatusCode  int    `json:"status_code"`
	Event       string `json:"event"`
	Action      string `json:"action"`
}

// cursorArg reads the optional page cursor: GitHub's opaque token, kept to
// characters that need no escaping beyond a query value.
func cursorArg(args map[string]any) (string, error) {
	c, err := argString(args, "cursor", false)
	if err != nil {
		return "", err
	}
	if len(c) > 256 || strings.ContainsAny(c, " \t\r\n&#") {
		return "", fail(ErrInvalidArgument, "argument \"cursor\": %q is not a page cursor", clip(c, 60))
	}
	return c, nil
}

func (g *github) listHookDeliveries(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	prefix, host, what, err := g.hookScope(args)
	if err != nil {
		return nil, err
	}
	path := prefix + "/deliveries?per_page=100"
	var hook int64
	if args["app"] != true {
		if hook, err = positiveIDArg(args, "hookId"); err != nil {
			return nil, err
		}
		path = fmt.Sprintf("%s/hooks/%d/deliveries?per_page=100", prefix, hook)
	}
	cursor, err := cursorArg(args)
	if err != nil {
		return nil, err
	}
	if cursor != "" {
		path += "&cursor=" + url.QueryEscape(cursor)
	}
	resp, err := g.send(ctx, st, ghRequest{method: http.MethodGet, path: path, host: host}, true, fmt.Sprintf("the deliveries of webhook %d of %s", hook, what))
	if err != nil {
		return nil, err
	}
	ds, err := decodeArray[ghHookDelivery]("a webhook delivery list", resp.body)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(ds))
	for _, d := range ds {
		if d.ID <= 0 {
			continue
		}
		out = append(out, map[string]any{"id": int(d.ID), "guid": d.GUID, "deliveredAt": d.DeliveredAt, "redelivery": d.Redelivery,
			"status": d.Status, "statusCode": d.StatusCode, "event": d.Event, "action": d.Action})
	}
	return map[string]any{"deliveries": out, "cursor": nextCursor(resp.header.Get("Link"))}, nil
}

// nextCursor is the cursor query value of a Link header's rel="next" URL
// ("" when there is none).
func nextCursor(link string) string {
	for _, part := range strings.Split(link, ",") {
		u, rel, ok := strings.Cut(part, ";")
		if !ok || !strings.Contains(rel, `rel="next"`) {
			continue
		}
		pu, err := url.Parse(strings.Trim(strings.TrimSpace(u), "<>"))
		if err != nil {
			return ""
		}
		return pu.Query().Get("cursor")
	}
	return ""
}

func (g *github) redeliverHookDelivery(ctx context.Context, st *callState, args map[string]any) (map[string]any, error) {
	prefix, host, what, err := g.hookScope(args)
	if err != nil {
		return nil, err
	}
	id, err := positiveIDArg(args, "deliveryId")
	if err != nil {
		return nil, err
	}
	path := prefix + "/deliveries/" + strconv.FormatInt(id, 10) + "/attempts"
	var hook int64
	if args["app"] != true {
		if hook, err = positiveIDArg(args, "hookId"); err != nil {
			return nil, err
		}
		path = prefix + "/hooks/" + strconv.FormatInt(hook, 10) + "/deliveries/" + strconv.FormatInt(id, 10) + "/attempts"
	}
	if _, err := g.send(ctx, st, ghRequest{method: http.MethodPost, path: path, host: host}, false,
		fmt.Sprintf("the redelivery of delivery %d of webhook %d of %s", id, hook, what)); err != nil {
		return nil, err
	}
	return map[string]any{}, nil
}
