package coordinator

// Behavior: a replica that leads serves every route through its
// Coordinator (/metrics adds the replica's own metrics). A replica that
// does not lead answers:
//   - GET /healthz: 200 {"status":"ok","role":…} (the process runs);
//   - GET /readyz: 200 {"status":"standby","role":"follower","leader":URL}
//     while it tails the log (ready to take over), with
//     "last_step_down":"stepped down at <RFC 3339>: <reason>" once it
//     led and stepped down (the reason /readyz said then: an audit's or
//     a refused write's kind, never its cause); 503 unavailable while
//     it takes over, steps down, or cannot read the log (naming a KEK
//     file it cannot use: missing, or readable by others) — and for good
//     once it found it could never take the log over, the message
//     starting "unfit:" and naming what differs (coordinator ids,
//     clusters, KEK fingerprints; never key material);
//   - GET /metrics: the replica's own metrics;
//   - GET /.well-known/jwks.json: the public keys of the key ring the log
//     holds — the same set the leader serves;
//   - GET /openapi.json: the API document;
//   - GET or HEAD of a console page while a leader is known: 307 to the
//     same path and query at the leader's advertised URL (a browser
//     cannot follow a 421); while none is known, a browser's (Accept
//     preferring text/html) gets the console's Standby page, 421, which
//     reloads itself until one is (console.ServeStandby; the console's
//     static files too);
//   - anything else (consumer, sync, admin, OAuth, console actions): 421
//     not_leader with {"error":{"code":"not_leader","leader":URL}} and
//     Capgate-Leader: URL ("" and no header while no leader is known).
//     It reads no credential: the answer holds nothing but the leader's
//     advertised URL, which every client is configured with anyway.

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/console"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/ocap"
)

func (r *Replica) serve(ctx *fasthttp.RequestCtx) {
	v := r.view.Load()
	path := string(ctx.Path())
	switch (leader.View{Serving: v.active != nil}).Route(path) { // the decision the simulation runs too
	case leader.RouteServe:
		if path == "/metrics" && ctx.IsGet() {
			r.serveMetrics(ctx, v.active)
			return
		}
		v.active.serve(ctx)
	case leader.RoutePublic:
		if !ctx.IsGet() {
			ctx.Response.Header.Set("Allow", fasthttp.MethodGet)
			writeError(ctx, api.CodeMethodNotAllowed, string(ctx.Method())+" not allowed; use GET")
			return
		}
		r.public(path)(ctx, v)
	default:
		if v.hint.URL == "" && r.cfg.Console.Enabled && console.Owns(ctx.Path()) && console.ServeStandby(ctx, r.standby(v)) {
			return // a browser's page: no leader to send it to yet
		}
		if (ctx.IsGet() || ctx.IsHead()) && isConsolePage(path) && isBaseURL(v.hint.URL) {
			// A browser cannot act on a 421: send the operator to the
			// leader's console. The target is the leader's advertised
			// URL (its configuration, read from the log's beat; only a
			// bare http(s) origin is followed) plus this request's
			// normalized path and query — never its host or an
			// absolute-form target (no open redirect).
			ctx.Response.Header.Set(api.HeaderLeader, v.hint.URL)
			ctx.Redirect(strings.TrimSuffix(v.hint.URL, "/")+string(ctx.URI().RequestURI()), fasthttp.StatusTemporaryRedirect)
			return
		}
		writeNotLeader(ctx, v.hint.URL, r.notLeaderMessage(v))
	}
}

// standby is what the console's Standby page says of this replica.
func (r *Replica) standby(v *replicaView) console.Standby {
	return console.Standby{Replica: r.ID(), Role: v.role.String(), Unfit: v.unfit != "", At: r.now()}
}

// public is the handler of one of leader.PublicPaths.
func (r *Replica) public(path string) func(*fasthttp.RequestCtx, *replicaView) {
	switch path {
	case "/healthz":
		return r.standbyHealth
	case "/readyz":
		return r.standbyReady
	case "/metrics":
		return func(ctx *fasthttp.RequestCtx, _ *replicaView) { r.serveMetrics(ctx, nil) }
	case "/.well-known/jwks.json":
		return r.standbyJWKS
	case "/openapi.json":
		return func(ctx *fasthttp.RequestCtx, _ *replicaView) {
			ctx.SetStatusCode(fasthttp.StatusOK)
			ctx.SetContentType(api.MediaJSON)
			ctx.SetBody(api.OpenAPIJSON())
		}
	}
	panic("coordinator: no handler for public path " + path)
}

func (r *Replica) serveError(ctx *fasthttp.RequestCtx, err error) {
	if r.standbyBodyTooLarge(ctx, err) {
		return
	}
	if v := r.view.Load(); v.active != nil && v.active.bodyRefused(ctx, err) {
		return
	} else if v.active != nil && errors.Is(err, fasthttp.ErrBodyTooLarge) && v.active.checkedTooLate(ctx) {
		return // a token the header check could not verify, verified now: 429, send it again (server.go)
	}
	writeHTTPError(ctx, err, r.cfg)
}

func (r *Replica) standbyHealth(ctx *fasthttp.RequestCtx, v *replicaView) {
	writeJSON(ctx, fasthttp.StatusOK, map[string]string{"status": "ok", "role": v.role.String()})
}

func (r *Replica) standbyReady(ctx *fasthttp.RequestCtx, v *replicaView) {
	f := r.follower.Load()
	switch {
	case v.unfit != "":
		writeError(ctx, api.CodeUnavailable, "unfit: this replica can never take the state log over: "+v.unfit+" ("+unfitFix+")")
	case v.role != leader.Follower:
		// The reason's own numbers are from when the role changed; the
		// age is live (newuser2 #9: "no commit for 1.6s" after 14 s).
		age := r.now().Sub(v.since).Round(100 * time.Millisecond)
		msg := fmt.Sprintf("%s for %s: %s", v.role, age, v.reason)
		if err := r.unreachable.Load(); err != nil {
			msg += "; the state log (Kafka) is unreachable: " + (*err).Error()
		}
		writeError(ctx, api.CodeUnavailable, msg)
	case f == nil:
		writeError(ctx, api.CodeUnavailable, "not following the state log yet"+kekProblem(r.cfg))
	case f.Err() != nil:
		writeError(ctx, api.CodeUnavailable, "cannot read the state log: "+f.Err().Error())
	default:
		body := map[string]string{"status": "standby", "role": v.role.String(), "leader": v.hint.URL}
		if v.stepDown != "" {
			body["last_step_down"] = v.stepDown
		}
		writeJSON(ctx, fasthttp.StatusOK, body)
	}
}

// kekProblem is why a replica that does not follow the log yet cannot
// open it with its KEK (a file whose mode was widened or that was removed
// after the start), or "": following opens the KEK afresh each try.
func kekProblem(cfg Config) string {
	if _, err := cfg.KafkaState.KEK(); err != nil {
		return ": " + err.Error()
	}
	return ""
}

// standbyJWKS serves the public keys of the ring in the log: every
// replica serves the set the leader signs with.
func (r *Replica) standbyJWKS(ctx *fasthttp.RequestCtx, _ *replicaView) {
	f := r.follower.Load()
	if f == nil {
		writeError(ctx, api.CodeUnavailable, "not following the state log yet")
		return
	}
	b, err := f.KeyRing()
	switch {
	case err != nil:
		writeError(ctx, api.CodeUnavailable, "cannot open the key ring in the state log: "+err.Error())
		return
	case b == nil:
		writeError(ctx, api.CodeUnavailable, "no key ring in the state log yet")
		return
	}
	ring := &ocap.KeyRing{}
	if err := ring.UnmarshalBinary(b); err != nil {
		writeError(ctx, api.CodeInternal, "key ring in the log does not decode")
		return
	}
	ctx.Response.Header.Set("Cache-Control", "public, max-age=30")
	writeJSON(ctx, fasthttp.StatusOK, ring.JWKS())
}

// serveMetrics serves the replica's metrics, and the leading
// Coordinator's beside them (internal/scrape: renders shared, paced).
func (r *Replica) serveMetrics(ctx *fasthttp.RequestCtx, active *Coordinator) {
	r.scrape.Serve(ctx)
	if active != nil {
		active.metrics.observe("metrics", ctx)
	}
}

// gatherers are what a render of /metrics reads: the replica's
// registry, and the leading Coordinator's when it leads.
func (r *Replica) gatherers() prometheus.Gatherer {
	gather := prometheus.Gatherers{r.metrics.registry}
	if active := r.view.Load().active; active != nil {
		gather = append(gather, active.metrics.registry)
	}
	return gather
}

// isBaseURL reports whether u is a bare http(s) origin (scheme, host,
// optional port; no user info, path, query or fragment): the only leader
// URL a browser is redirected to.
func isBaseURL(u string) bool {
	p, err := url.Parse(u)
	return err == nil && (p.Scheme == "http" || p.Scheme == "https") && p.Host != "" && p.User == nil &&
		(p.Path == "" || p.Path == "/") && p.RawQuery == "" && p.Fragment == "" // url.Parse refuses control characters
}

// isConsolePage reports whether path is the console or one of its pages
// (not its data routes, /console/api/… and /console/events, whose
// callers read the JSON 421).
func isConsolePage(path string) bool {
	if path != "/console" && !strings.HasPrefix(path, "/console/") {
		return false
	}
	return !strings.HasPrefix(path, "/console/api/") && path != "/console/events"
}
