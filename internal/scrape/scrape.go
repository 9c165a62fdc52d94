// Package scrape answers GET /metrics of the coordinator and the gateway:
// the Prometheus text format, rendered at most once per Gap, one render
// at a time, and shared by every request that arrived before it began.
//
// /metrics answers anyone (no token: README), and promhttp gathered and
// encoded the registry for each request and copied its ~25 KB into each
// answer: every scrape read /proc (the process collector lists every
// open descriptor), asked the coordinator's event loop for its gateways
// (the sync-lag collector), and a connection that asked and read nothing
// held its own copy until write_timeout — 1,000 connections per address
// ~25 MB of answers at the coordinator, beside fasthttp's buffers
// (redteam16). Now the work is a render per Gap at most, however many
// ask, and its bytes are one slice handed to every answer uncopied, so
// unread answers share the renders of one write_timeout.
//
// A request never gets a render that began before it arrived: it joins
// the render not yet begun, or the next, so a counter read right after
// the act that moved it shows it.
package scrape

import (
	"bytes"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/common/expfmt"
	"github.com/valyala/fasthttp"
)

// Gap is the least time between two renders' beginnings.
const Gap = 100 * time.Millisecond

// Answer renders a gatherer for GET /metrics.
type Answer struct {
	gather func() prometheus.Gatherer
	gap    time.Duration

	renders atomic.Uint64

	mu        sync.Mutex
	current   *render // begun or waiting for the gap
	next      *render // asked for while current had begun
	lastBegun time.Time
}

type render struct {
	done   chan struct{}
	begun  bool
	status int
	body   []byte
}

// New is an Answer rendering what gather returns when a render begins
// (a replica's changes with its leadership).
func New(gather func() prometheus.Gatherer) *Answer {
	return &Answer{gather: gather, gap: Gap}
}

// Serve answers ctx with a render begun after it arrived.
func (a *Answer) Serve(ctx *fasthttp.RequestCtx) {
	a.mu.Lock()
	var r *render
	switch {
	case a.current != nil && !a.current.begun:
		r = a.current
	case a.next != nil:
		r = a.next
	default:
		r = &render{done: make(chan struct{})}
		if a.current == nil {
			a.startLocked(r)
		} else {
			a.next = r
		}
	}
	a.mu.Unlock()
	<-r.done
	ctx.SetStatusCode(r.status)
	ctx.SetContentType(string(expfmt.NewFormat(expfmt.TypeTextPlain)))
	ctx.Response.SetBodyRaw(r.body)
}

// Renders is how many renders were made.
func (a *Answer) Renders() uint64 { return a.renders.Load() }

// startLocked makes r the current render and runs it once the gap
// since the last one has passed (a.mu held).
func (a *Answer) startLocked(r *render) {
	a.current = r
	wait := time.Until(a.lastBegun.Add(a.gap))
	go a.run(r, wait)
}

func (a *Answer) run(r *render, wait time.Duration) {
	if wait > 0 {
		time.Sleep(wait) // paces renders; no request's outcome rests on it
	}
	a.mu.Lock()
	r.begun, a.lastBegun = true, time.Now()
	a.mu.Unlock()
	r.status, r.body = encode(a.gather())
	a.renders.Add(1)
	a.mu.Lock()
	close(r.done)
	a.current = nil
	if n := a.next; n != nil {
		a.next = nil
		a.startLocked(n)
	}
	a.mu.Unlock()
}

// encode renders g in the text format: 500 with the error when
// gathering failed, as promhttp's default (HTTPErrorOnError).
func encode(g prometheus.Gatherer) (int, []byte) {
	families, err := g.Gather()
	if err != nil {
		return fasthttp.StatusInternalServerError, []byte("An error has occurred while serving metrics:\n\n" + err.Error())
	}
	var buf bytes.Buffer
	enc := expfmt.NewEncoder(&buf, expfmt.NewFormat(expfmt.TypeTextPlain))
	for _, f := range families {
		if err := enc.Encode(f); err != nil {
			return fasthttp.StatusInternalServerError, []byte("An error has occurred while serving metrics:\n\n" + err.Error())
		}
	}
	return fasthttp.StatusOK, bytes.Clone(buf.Bytes())
}
