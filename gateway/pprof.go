package gateway

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/refusallog"
)

// Behavior: with pprof_listen set, the Go runtime profiles
// (net/http/pprof: /debug/pprof/, profile, heap, allocs, goroutine, …)
// are served on that address, apart from the fetch listener, to callers
// presenting the gateway's own sync token as bearer; anything else is
// 401. Off (empty) by default. A CPU profile runs for its ?seconds=, so
// the listener has no write timeout; it has a read timeout and closes
// with the gateway.

// startPprof listens on cfg.PprofListen and serves the profiles.
func (g *Gateway) startPprof() error {
	if g.cfg.PprofListen == "" {
		return nil
	}
	ln, err := net.Listen("tcp", g.cfg.PprofListen)
	if err != nil {
		return fmt.Errorf("gateway: pprof listen: %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	g.pprof = &http.Server{Handler: g.pprofAuth(mux), ReadHeaderTimeout: g.cfg.ReadTimeout, ReadTimeout: g.cfg.ReadTimeout}
	go func() {
		if err := g.pprof.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			g.log.Warn("pprof listener stopped", zap.Error(err))
		}
	}()
	g.pprofAddr = ln.Addr().String()
	g.log.Info("pprof listening", zap.String("addr", g.pprofAddr))
	return nil
}

// PprofAddr is the address the profiles are served on ("" when off):
// pprof_listen with its port resolved (":0" picks a free one).
func (g *Gateway) PprofAddr() string { return g.pprofAddr }

// pprofAuth lets through requests bearing the sync token.
func (g *Gateway) pprofAuth(next http.Handler) http.Handler {
	want := []byte("Bearer " + string(g.cfg.SyncToken))
	refusals := refusallog.New(g.log) // rate-limited; the route, the caller, never the token
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get("Authorization")
		const scheme = "Bearer "
		if g.cfg.SyncToken == "" || len(got) < len(scheme) || !strings.EqualFold(got[:len(scheme)], scheme) ||
			subtle.ConstantTimeCompare([]byte(scheme+got[len(scheme):]), want) != 1 {
			refusals.Refused("pprof sync token", "not the gateway's sync token", zap.String("route", r.URL.Path), zap.String("remote", r.RemoteAddr))
			w.Header().Set("WWW-Authenticate", `Bearer realm="capgate-pprof"`)
			w.Header().Set("Content-Type", api.MediaJSON)
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write(api.EncodeError(api.CodeUnauthorized, "bearer: the gateway's sync token", nil))
			return
		}
		next.ServeHTTP(w, r)
	})
}

// stopPprof closes the pprof listener, cutting profiles in progress.
func (g *Gateway) stopPprof() {
	if g.pprof != nil {
		_ = g.pprof.Close()
	}
}
