package coordinator

// Behavior: TLS on the coordinator's one listener (tls.cert_file set) and
// who must show a client certificate. The listener asks for a client
// certificate whenever tls.client_ca_file is set (VerifyClientCertIfGiven,
// or require) and each class of routes decides what it needs:
//
//	sync       tls.sync.auth: token (default), certificate (instead of the
//	           sync token), token+certificate
//	admin      tls.admin.auth: the same, for the admin token
//	consumers  tls.consumers.auth: token (default) or token+certificate;
//	           join, heartbeat, commit, leave, offsets, attenuate and the
//	           OAuth token endpoint always take their own bearer token or
//	           client secret too
//	public     healthz, metrics, jwks, openapi.json: never
//
// A route that needs a certificate the connection did not verify (none,
// or its names outside tls.<class>.client_names) answers 403
// client_certificate_required before any token is looked at.
//
// tls.sync_bind_identity (default true) binds the gateway id a sync
// request names (poll, ack, leave) to the certificate the sync channel
// asks for: the id must be the certificate's common name or one of its
// DNS names, else 403 gateway_identity_mismatch and nothing changes, so
// one gateway's certificate cannot ack or leave for another gateway. It
// takes effect only while tls.sync.auth asks for a certificate; with
// tokens alone the sync token is the gateway's whole identity.

import (
	"crypto/tls"
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/tlsconf"
)

// TLSConfig is the coordinator's listener TLS and its per-route client
// certificate requirements.
type TLSConfig struct {
	tlsconf.ServerConfig `yaml:",inline"`
	// Sync, Admin and Consumers say what each class of routes demands.
	Sync      tlsconf.Channel `yaml:"sync"`
	Admin     tlsconf.Channel `yaml:"admin"`
	Consumers tlsconf.Channel `yaml:"consumers"`
	// SyncBindIdentity: a sync request's gateway id must be its client
	// certificate's common name or a DNS name of it, when tls.sync asks
	// for a certificate.
	SyncBindIdentity bool `yaml:"sync_bind_identity"`
}

// DefaultTLSConfig is TLS off; tokens only.
func DefaultTLSConfig() TLSConfig {
	return TLSConfig{ServerConfig: tlsconf.DefaultServerConfig(),
		Sync: tlsconf.DefaultChannel(), Admin: tlsconf.DefaultChannel(), Consumers: tlsconf.DefaultChannel(),
		SyncBindIdentity: true}
}

// Validate names the first bad field.
func (c TLSConfig) Validate() error {
	if err := c.ServerConfig.Validate("tls"); err != nil {
		return err
	}
	if err := c.Sync.Validate("tls.sync", c.ServerConfig, false); err != nil {
		return err
	}
	if err := c.Admin.Validate("tls.admin", c.ServerConfig, false); err != nil {
		return err
	}
	return c.Consumers.Validate("tls.consumers", c.ServerConfig, true)
}

// channelAuth decides a sync or admin request: the client certificate
// when ch needs one, then the bearer token when ch needs one. On refusal
// it writes the answer (what names the credential) and returns false.
func (c *Coordinator) channelAuth(ctx *fasthttp.RequestCtx, ch tlsconf.Channel, tokens secretSet, what string) bool {
	if !channelCertificate(ctx, ch, what) {
		c.refusedChannel(ctx, what, "no client certificate with an allowed name")
		return false
	}
	if ch.NeedsToken() && !tokens.matches(bearer(ctx)) {
		reason := "not a known " + what + " token"
		if bearer(ctx) == nil {
			reason = "no bearer token"
		}
		c.refusedChannel(ctx, what, reason)
		writeError(ctx, api.CodeUnauthorized, c.channelRefusal(ctx, what))
		return false
	}
	return true
}

// channelRefusal is the answer to a sync or admin request without its
// token, saying what was sent instead where it can tell: curl's
// -H "Authorization: $TOKEN" (no Bearer: bearerRequired), a client
// credential or the other channel's token were "admin token required" or
// "admin token refused: not a known admin token" (newuser6). The kind a JWT claims is
// read unverified, for the message only.
func (c *Coordinator) channelRefusal(ctx *fasthttp.RequestCtx, what string) string {
	article := map[string]string{"admin": "an", "sync": "a"}
	token := bearer(ctx)
	other, otherTokens := "sync", c.syncTokens
	if what == "sync" {
		other, otherTokens = "admin", c.adminTokens
	}
	switch {
	case token == nil:
		return bearerRequired(ctx, what+" token")
	case ocap.ClaimedKind(token) != "":
		return what + " token refused: this is " + ocap.ClaimedKind(token).Noun() + ", not " + article[what] + " " + what + " token: " + what +
			" routes take a token whose hash is in the coordinator's " + what + "_token_hashes (capgate dev: " + what + "_token in credentials.json)"
	case otherTokens.matches(token):
		return what + " token refused: this is " + article[other] + " " + other + " token, not " + article[what] + " " + what + " token (capgate dev: " + what + "_token in credentials.json)"
	}
	// An unknown token said only that, leaving which setting to compare
	// to the reader; the gateway repeats this answer in its "sync failed"
	// warnings (newuser10).
	return what + " token refused: not a known " + what + " token: the coordinator's " + what +
		"_token_hashes hold no SHA-256 of it (capgate keys secret prints a token and its hash; capgate dev: " + what + "_token in credentials.json)"
}

// refusedChannel logs a refused sync or admin request (rate-limited:
// refusallog): the route, the caller's address and, for sync, the
// gateway id it claims — never the token.
func (c *Coordinator) refusedChannel(ctx *fasthttp.RequestCtx, what, reason string) {
	fields := []zap.Field{zap.String("route", string(ctx.Path())), zap.String("remote", c.clientAddr(ctx).String())}
	if gw := ctx.QueryArgs().Peek("gateway"); len(gw) > 0 {
		fields = append(fields, zap.String("gateway", string(gw[:min(len(gw), 128)])))
	}
	c.refusals.Refused(what+" token", reason, fields...)
}

// channelCertificate answers 403 client_certificate_required when ch
// needs a client certificate this connection did not verify.
func channelCertificate(ctx *fasthttp.RequestCtx, ch tlsconf.Channel, what string) bool {
	if ch.NeedsCertificate() && !ch.Allows(ctx.TLSConnectionState()) {
		writeError(ctx, api.CodeClientCertificateRequired, what+" routes need a client certificate signed by the client CA with an allowed name")
		return false
	}
	return true
}

// consumer wraps a consumer route with the consumers' certificate rule,
// and counts its large answer among the answers held (answers.go).
func (c *Coordinator) consumer(h handler) handler {
	return c.consumerThen(h, c.countAnswer)
}

// consumerRead is consumer for a tenant's read (a GET): its large
// answer is refused over the answers held (answers.go).
func (c *Coordinator) consumerRead(h handler) handler {
	return c.consumerThen(h, c.holdRead)
}

func (c *Coordinator) consumerThen(h handler, hold func(*fasthttp.RequestCtx)) handler {
	needsCertificate := c.cfg.TLS.Consumers.NeedsCertificate()
	return func(ctx *fasthttp.RequestCtx, params []string) {
		if needsCertificate && !channelCertificate(ctx, c.cfg.TLS.Consumers, "consumer") {
			return
		}
		h(ctx, params)
		hold(ctx)
	}
}

// syncIdentity answers 403 gateway_identity_mismatch when
// tls.sync_bind_identity binds sync requests to their certificate and
// gateway is neither its common name nor one of its DNS names.
func (c *Coordinator) syncIdentity(ctx *fasthttp.RequestCtx, gateway string) bool {
	if !c.cfg.TLS.SyncBindIdentity || !c.cfg.TLS.Sync.NeedsCertificate() || certificateNames(ctx.TLSConnectionState(), gateway) {
		return true
	}
	c.refusedChannel(ctx, "sync", "gateway id is not the client certificate's name")
	writeError(ctx, api.CodeGatewayIdentityMismatch,
		"gateway "+strconv.Quote(gateway)+" is not a name of the client certificate (its common name or a DNS name; tls.sync_bind_identity)")
	return false
}

// certificateNames reports whether name is the verified client
// certificate's common name or one of its DNS names.
func certificateNames(cs *tls.ConnectionState, name string) bool {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.PeerCertificates) == 0 {
		return false
	}
	leaf := cs.PeerCertificates[0]
	return leaf.Subject.CommonName == name || slices.Contains(leaf.DNSNames, name)
}
