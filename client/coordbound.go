package client

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
)

// hostBound is a consumer's bound on its requests in flight to each
// coordinator replica (Config.CoordinatorConnectionsMax): a request to a
// listed replica's host takes one of its slots before it is sent and
// gives it back when its answer's body is closed (or it failed), so the
// connections it holds there stay within the bound whatever the HTTP
// client (one request per HTTP/1.1 connection). A request waiting for a
// slot ends with its context. Requests to other hosts (gateways) pass
// through. It sits below leaderTransport, which picks the replica of
// each attempt. Safe for concurrent use.
type hostBound struct {
	next  http.RoundTripper
	slots map[string]chan struct{} // by host:port, fixed at construction
}

// boundCoordinators returns a copy of hc whose transport bounds the
// requests in flight to each of the coordinator replicas at urls to max;
// hc is unchanged. The default client's transport (newHTTPClient) is
// bounded in its connections per host too (MaxConnsPerHost), which also
// covers the moment between an answer read and its connection idle
// again.
func boundCoordinators(hc *http.Client, urls []string, max int) *http.Client {
	b := &hostBound{next: hc.Transport, slots: map[string]chan struct{}{}}
	if b.next == nil {
		b.next = http.DefaultTransport
	}
	for _, u := range urls {
		if p, err := url.Parse(u); err == nil && p.Host != "" {
			b.slots[hostKey(p)] = make(chan struct{}, max)
		}
	}
	out := *hc
	out.Transport = b
	return &out
}

// hostKey is u's host:port, the port filled in from the scheme.
func hostKey(u *url.URL) string {
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = "80"
		if u.Scheme == "https" {
			port = "443"
		}
	}
	return host + ":" + port
}

// RoundTrip implements http.RoundTripper.
func (b *hostBound) RoundTrip(req *http.Request) (*http.Response, error) {
	slot := b.slots[hostKey(req.URL)]
	if slot == nil {
		return b.next.RoundTrip(req)
	}
	select {
	case slot <- struct{}{}:
	case <-req.Context().Done():
		if req.Body != nil {
			req.Body.Close() // a RoundTripper closes the body, even on error
		}
		return nil, req.Context().Err()
	}
	resp, err := b.next.RoundTrip(req)
	if err != nil {
		<-slot
		return nil, err
	}
	resp.Body = &slotBody{ReadCloser: resp.Body, slot: slot}
	return resp, nil
}

// CloseIdleConnections passes to the transport below (http.Client's
// CloseIdleConnections looks for it).
func (b *hostBound) CloseIdleConnections() {
	if c, ok := b.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

// slotBody gives its request's slot back when closed, once.
type slotBody struct {
	io.ReadCloser
	slot chan struct{}
	once sync.Once
}

func (s *slotBody) Close() error {
	err := s.ReadCloser.Close()
	s.once.Do(func() { <-s.slot })
	return err
}
