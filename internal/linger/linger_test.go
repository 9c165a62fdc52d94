package linger

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/valyala/fasthttp"
)

// TestRefusedBodyIsAnsweredThenReleased: a fasthttp server that refuses
// a 4 MiB body (over its 1 KiB limit) with OnClose in its ErrorHandler
// answers Go's client, which sends the whole body first, with the 413
// every time (without OnClose the client gets a reset); and each
// lingering connection ends once the client has gone.
func TestRefusedBodyIsAnsweredThenReleased(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &fasthttp.Server{
		MaxRequestBodySize: 1 << 10,
		Handler:            func(ctx *fasthttp.RequestCtx) { ctx.SetStatusCode(200) },
		ErrorHandler: func(ctx *fasthttp.RequestCtx, err error) {
			OnClose(ctx)
			ctx.SetStatusCode(fasthttp.StatusRequestEntityTooLarge)
			ctx.SetBodyString("too large")
		},
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Shutdown() })
	body := bytes.Repeat([]byte("x"), 4<<20)
	for i := range 10 {
		hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{}}
		resp, err := hc.Post("http://"+ln.Addr().String()+"/", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatalf("request %d: %v, want the 413", i, err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 413 || string(got) != "too large" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, got)
		}
		hc.CloseIdleConnections()
	}
	deadline := time.Now().Add(10 * time.Second)
	for Lingering() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d connections still lingering after their clients left", Lingering())
		}
		time.Sleep(5 * time.Millisecond)
	}
}
