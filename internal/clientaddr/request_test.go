package clientaddr

import (
	"io"
	"net"
	"net/http"
	"strings"
	"testing"

	"github.com/valyala/fasthttp"
)

// TestRequestOverSockets: Request on a real fasthttp server, requests
// from two loopback addresses — 127.0.0.2 is the trusted proxy, 127.0.0.3
// is not. Every X-Forwarded-For line of the header section counts, in
// order, whatever its case; a trailer never does.
func TestRequestOverSockets(t *testing.T) {
	p := mustParse(t, "127.0.0.2/32", "10.0.0.0/8")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{Handler: func(ctx *fasthttp.RequestCtx) {
		_ = ctx.PostBody() // a chunked body and its trailer are read first, as a POST handler's
		ctx.SetBodyString(p.Request(ctx).String())
	}}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Shutdown() })
	url := "http://" + ln.Addr().String() + "/"
	for _, c := range []struct {
		name, from string
		header     http.Header // written as given: keys in sorted order, each key's lines in order
		want       string
	}{
		{"untrusted peer", "127.0.0.3", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "127.0.0.3"},
		{"trusted peer", "127.0.0.2", http.Header{"X-Forwarded-For": {"198.51.100.1"}}, "198.51.100.1"},
		{"trusted peer, no header", "127.0.0.2", nil, "127.0.0.2"},
		{"every line in order, whatever its case", "127.0.0.2",
			http.Header{"X-Forwarded-For": {"1.1.1.1"}, "Y-Other": {"x"}, "x-forwarded-for": {"198.51.100.1, 10.0.0.1"}}, "198.51.100.1"},
		{"the last line is rightmost", "127.0.0.2", http.Header{"X-Forwarded-For": {"198.51.100.1", "198.51.100.2"}}, "198.51.100.2"},
		{"garbage", "127.0.0.2", http.Header{"X-Forwarded-For": {"198.51.100.1, not-an-ip"}}, "127.0.0.2"},
	} {
		t.Run(c.name, func(t *testing.T) {
			req, _ := http.NewRequest(http.MethodGet, url, nil)
			req.Header = c.header
			if status, got := requestFrom(t, c.from, req); status != 200 || got != c.want {
				t.Fatalf("%d keyed as %s, want %s", status, got, c.want)
			}
		})
	}
	// A hop in a trailer would sit right of the proxy's own. fasthttp
	// refuses X-Forwarded-* trailers (400) today; Request reads the header
	// section alone in any case.
	req, _ := http.NewRequest(http.MethodPost, url, io.MultiReader(strings.NewReader("{}")))
	req.Header = http.Header{"X-Forwarded-For": {"198.51.100.1"}}
	req.Trailer = http.Header{"X-Forwarded-For": {"203.0.113.66"}}
	if status, got := requestFrom(t, "127.0.0.2", req); status == 200 && got != "198.51.100.1" {
		t.Fatalf("a trailer's hop: keyed as %s", got)
	}
}

// requestFrom sends req from the loopback address from on a connection
// of its own and returns the answer's status and body.
func requestFrom(t *testing.T, from string, req *http.Request) (int, string) {
	t.Helper()
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(from)}}
	cl := &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, strings.TrimSpace(string(b))
}
