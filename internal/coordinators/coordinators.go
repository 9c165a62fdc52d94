// Package coordinators is the clients' decision of which coordinator
// replica to call: the gateways' sync client (gateway), the Go SDK
// (client) and the CLI share it. It is pure: no IO, no clock; the callers
// send the requests, sleep their own backoffs, and tell it what came back.
//
// The rules (DESIGN §5):
//   - Calls go to the current URL, the first of the list at the start.
//   - A replica that does not lead answers 421 not_leader naming the
//     leader (body detail "leader", header Capgate-Leader). When that URL
//     is one of the configured ones, it becomes current and the call is
//     sent there at once: one more round trip, and every later call goes
//     there directly (the hint is cached). A hint outside the list is
//     not followed: a credential only ever goes to a URL the operator
//     configured.
//   - With no usable hint, or when the current replica is unreachable or
//     failing, the next URL of the list becomes current.
//   - Once a whole round of the list has missed in a row (len(list)
//     misses since the last success), the caller backs off before the
//     next call; a success ends the streak.
//   - One call that walks the list itself (the SDK's transport: Call)
//     sends to each URL at most once: a URL it found unreachable, or
//     that answered it not_leader, is skipped, and a hint naming one is
//     not followed — other calls may have moved the shared list back to
//     it (a standby names a dead leader until its lease runs out). So
//     the call tries every replica before it gives up.
//
// A List is not safe for concurrent use; the SDK guards it with a mutex.
package coordinators

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// List is the configured coordinator URLs and the one in use.
type List struct {
	urls    []string
	current int
	misses  int // calls missed in a row since the last success
}

// New checks urls (http(s), a host, no query, fragment or user info; at
// least one; no duplicates) and returns the list, trailing slashes
// trimmed, the first one current.
func New(urls []string) (*List, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("no coordinator URL")
	}
	l := &List{urls: make([]string, 0, len(urls))}
	for _, raw := range urls {
		u, err := Normalize(raw)
		if err != nil {
			return nil, err
		}
		if l.index(u) >= 0 {
			return nil, fmt.Errorf("coordinator URL %q listed twice", raw)
		}
		l.urls = append(l.urls, u)
	}
	return l, nil
}

// Split parses a comma-separated list of URLs (the form of
// gateway.coordinator_url, $CAPGATE_COORDINATOR_URL and --coordinator),
// ignoring blanks around commas.
func Split(list string) []string {
	var out []string
	for _, s := range strings.Split(list, ",") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// Normalize checks one base URL and returns it in the form hints are
// compared in: scheme and host lower-cased, no trailing slash.
func Normalize(raw string) (string, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("coordinator URL must be an http(s) URL with a host, got %q", raw)
	}
	if u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return "", fmt.Errorf("coordinator URL must carry no query, fragment or user info, got %q", raw)
	}
	u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
	return strings.TrimRight(u.String(), "/"), nil
}

// URLs are the configured URLs, normalized, in order.
func (l *List) URLs() []string { return append([]string(nil), l.urls...) }

// Current is the URL calls go to.
func (l *List) Current() string { return l.urls[l.current] }

// Succeeded records an answer from base (any answer but not_leader, an
// unreachable replica or a 5xx): it is current, and the miss streak ends.
func (l *List) Succeeded(base string) {
	if i := l.index(base); i >= 0 {
		l.current = i
	}
	l.misses = 0
}

// NotLeader records a not_leader answer from base naming hint (may be
// "") and returns the URL to call next and whether to back off first.
func (l *List) NotLeader(base, hint string) (next string, backoff bool) {
	if h, err := Normalize(hint); err == nil && h != base {
		if i := l.index(h); i >= 0 && l.index(base) == l.current {
			l.current = i
			return l.miss()
		}
	}
	return l.Failed(base)
}

// Failed records that base is unreachable or failing and returns the URL
// to call next and whether to back off first. A failure of a URL that is
// no longer current (another call moved on already) moves nothing.
func (l *List) Failed(base string) (next string, backoff bool) {
	if l.index(base) == l.current {
		l.current = (l.current + 1) % len(l.urls)
	}
	return l.miss()
}

func (l *List) miss() (string, bool) {
	l.misses++
	return l.Current(), l.misses%len(l.urls) == 0
}

func (l *List) index(u string) int {
	for i, v := range l.urls {
		if v == u {
			return i
		}
	}
	return -1
}

// Base returns the configured URL that rawURL starts with (a request's
// full URL; scheme and host compared without case) and the rest of it;
// ok is false when it starts with none.
func (l *List) Base(rawURL string) (base, rest string, ok bool) {
	for _, u := range l.urls {
		if len(rawURL) < len(u) || !strings.EqualFold(rawURL[:len(u)], u) {
			continue
		}
		if r := rawURL[len(u):]; r == "" || r[0] == '/' || r[0] == '?' {
			return u, r, true
		}
	}
	return "", "", false
}

// Call is one request's walk over a List: it sends to each URL at most
// once, so it ends after at most len(list) attempts, having tried every
// replica, whatever other calls do to the shared list meanwhile. It
// reads and moves the List, so its methods need the List's guard; a
// Call itself belongs to one request.
type Call struct {
	list  *List
	tried []string // the URLs sent to, in order, each once
	hint  string   // a listed leader not yet tried, named by a not_leader
}

// Call starts one request's walk.
func (l *List) Call() *Call { return &Call{list: l} }

// Next is the URL to send to, recorded as tried: the leader the last
// not_leader named, else the list's current URL, else the first after
// it (in list order, wrapping) — never one this call tried. ok is false
// once it tried them all.
func (c *Call) Next() (url string, ok bool) {
	if h := c.hint; h != "" {
		c.hint = ""
		return c.try(h), true
	}
	n := len(c.list.urls)
	for i := range n {
		if u := c.list.urls[(c.list.current+i)%n]; !slices.Contains(c.tried, u) {
			return c.try(u), true
		}
	}
	return "", false
}

func (c *Call) try(u string) string {
	c.tried = append(c.tried, u)
	return u
}

// NotLeader records base's not_leader naming hint (may be ""): a listed
// hint this call has not tried is where it goes next (List.NotLeader
// moves the shared list there too, when base is its current URL); a
// hint it tried already is not followed, and the list moves on from
// base as after a failure.
func (c *Call) NotLeader(base, hint string) {
	h, err := Normalize(hint)
	if err == nil && slices.Contains(c.tried, h) {
		c.list.Failed(base)
		return
	}
	if err == nil && h != base && c.list.index(h) >= 0 {
		c.hint = h
	}
	c.list.NotLeader(base, hint)
}
