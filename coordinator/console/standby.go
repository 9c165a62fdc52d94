package console

// Behavior: a coordinator replica that does not lead and knows no leader
// — the replicas are starting, or a takeover is under way — answers a
// browser's GET or HEAD of a console page (Accept preferring text/html
// to JSON: api.Negotiate, ties to JSON) with the Standby page, 421 as the
// API's answer: this replica is a standby, no replica leads yet, and the
// page asks again every standbyRetrySeconds (a meta refresh: no script).
// The reload is the same request, so once a leader is known the replica
// sends it there (307, replica_http.go) and once this replica leads it
// serves the page. Before, the browser showed the JSON 421 body. The
// console's static files are served too (the page's style and icon): they
// hold no data. Any other request — a script's read (Accept */*), the
// event stream, an action — is left to the caller's JSON 421.

import (
	"bytes"
	"html/template"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// standbyRetrySeconds is how often the Standby page reloads itself: about
// a takeover (lease_timeout 1 s and its stagger by default).
const standbyRetrySeconds = 2

// Standby is what the Standby page says of the replica.
type Standby struct {
	Replica string    // its id
	Role    string    // its role: follower, candidate, stepping_down
	Unfit   bool      // it can never take the state log over (its /readyz says why)
	At      time.Time // when it answered
}

// standbyPage is the Standby page's template (layout.html with
// standby.html), parsed once.
var standbyPage = sync.OnceValues(func() (*template.Template, error) {
	pages, err := parsePages()
	if err != nil {
		return nil, err
	}
	return pages["standby"], nil
})

// ServeStandby answers a request to a replica that does not lead and
// knows no leader, and reports whether it did: a console static file, or
// a browser's GET or HEAD of a console page. Else nothing is written and
// the caller answers its JSON 421.
func ServeStandby(ctx *fasthttp.RequestCtx, s Standby) bool {
	if !ctx.IsGet() && !ctx.IsHead() {
		return false
	}
	path := string(ctx.Path())
	if name, ok := strings.CutPrefix(path, Prefix+"/static/"); ok {
		securityHeaders(ctx)
		serveStatic(ctx, nil, []string{name})
		return true
	}
	if media, ok := api.Negotiate(ctx.Request.Header.Peek(fasthttp.HeaderAccept), api.MediaJSON, mediaHTML); !ok || media != mediaHTML {
		return false
	}
	t, err := standbyPage()
	if err != nil {
		return false
	}
	var buf bytes.Buffer
	d := pageData{Title: "No leader yet", Refresh: standbyRetrySeconds, Body: s}
	if err := t.ExecuteTemplate(&buf, "standby", d); err != nil {
		return false
	}
	securityHeaders(ctx)
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.Itoa(standbyRetrySeconds))
	ctx.SetStatusCode(fasthttp.StatusMisdirectedRequest)
	ctx.SetContentType("text/html; charset=utf-8")
	ctx.SetBody(buf.Bytes())
	return true
}
