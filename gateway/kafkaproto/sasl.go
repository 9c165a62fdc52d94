package kafkaproto

// Behavior: SASL (SaslHandshake v0–v1, SaslAuthenticate v0–v2).
//
//   - After a SaslHandshake v0 the next frame is the mechanism's raw
//     initial response (no request header), answered by an empty frame on
//     success; after v1, SaslAuthenticate requests carry it (librdkafka
//     insists on v0 being listed even though it then uses v1).
//   - Mechanisms OAUTHBEARER (RFC 7628: the token is a capgate client
//     credential, partition capability, or a JWT of a gateway.kafka_oidc
//     issuer) and PLAIN (the token is the
//     password; the user name is free and ignored, an authzid must be
//     empty or equal it). Before SASL completed only ApiVersions,
//     SaslHandshake and SaslAuthenticate are accepted, in that order;
//     anything else, a second SaslAuthenticate, or a SaslAuthenticate
//     without a SaslHandshake before it, closes the connection.
//   - A refused token answers SASL_AUTHENTICATION_FAILED (58) with a
//     message naming the reason (a JWT of an issuer outside
//     gateway.kafka_oidc: that issuer, issuer.go; an opaque token, such
//     as the admin token: what a Kafka client takes instead), then the connection
//     is closed — unless
//     the gateway cannot vouch for its view (before its first sync, or
//     out of sync): then the connection is closed unanswered, which
//     clients retry (errUnvouched). So does
//     any token when gateway.tls.consumers asks for a client certificate
//     (token+certificate) and the connection's TLS handshake carried no
//     verified one with an allowed name (Config.Consumers). An
//     unknown mechanism answers UNSUPPORTED_SASL_MECHANISM (33) and closes.
//   - KIP-368: SaslAuthenticate v1+ answers the session lifetime (until
//     the token expires). A client may re-authenticate (SaslHandshake +
//     SaslAuthenticate, or a raw frame after SaslHandshake v0) on the
//     open connection with a token of the same identity (kind, issuer,
//     subject — the principal name, as Kafka's — and for a capability
//     its partition); one of another identity is answered
//     SASL_AUTHENTICATION_FAILED and closes the connection. A renewed
//     client credential carries the group members the connection's
//     client key reached with its previous credential over to it
//     (groups.carryOver, member.carryOver) — only those: a credential
//     of another holder that bears the same name has another key
//     (Principal.tenant) and gets nothing of them. A connection opened
//     with the renewed credential before that re-authentication reaches
//     no member yet: its fetches are answered empty and throttled until
//     the carry-over (groups.renewalPending), not refused. A member never
//     outlives the credential it joined with, so without
//     re-authentication the member ends when that credential expires. A request that arrives
//     after the session ended, other than that re-authentication, closes
//     the connection, as a Kafka broker does.

import (
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/identity"
	"github.com/capgate/capgate/ocap"
)

const (
	mechPlain       = "PLAIN"
	mechOAuthBearer = "OAUTHBEARER"
)

var mechanisms = []string{mechOAuthBearer, mechPlain}

// saslState is where a connection is in its SASL exchange.
type saslState uint8

const (
	saslStart     saslState = iota // nothing yet: ApiVersions or SaslHandshake
	saslHandshook                  // mechanism chosen: SaslAuthenticate next
	saslDone                       // authenticated
	saslReauth                     // authenticated, re-authentication handshake done
)

var errSASL = errors.New("kafkaproto: SASL")

// errUnvouched: a token did not verify while the gateway cannot vouch
// for its view (before its first sync, or out of sync). The exchange is
// closed unanswered — a connection error, which clients retry — rather
// than answered SASL_AUTHENTICATION_FAILED, which Java and KafkaJS
// clients take as final and which would call a good token bad.
var errUnvouched = errors.New("kafkaproto: the gateway cannot verify tokens yet")

func handleSASLHandshake(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLHandshakeRequest)
	resp := req.ResponseKind().(*kmsg.SASLHandshakeResponse)
	resp.SupportedMechanisms = mechanisms
	switch c.sasl {
	case saslStart:
		c.sasl = saslHandshook
	case saslDone:
		c.sasl = saslReauth
	default:
		return nil, fmt.Errorf("%w: handshake out of order", errSASL)
	}
	if req.Mechanism != mechPlain && req.Mechanism != mechOAuthBearer {
		resp.ErrorCode = kerr.UnsupportedSaslMechanism.Code
		c.closeAfter = true
		return resp, nil
	}
	c.mechanism = req.Mechanism
	c.rawSASL = req.Version == 0
	return resp, nil
}

// rawAuthenticate reads the raw SASL frame that follows a SaslHandshake
// v0 and authenticates with it: an empty frame answers success; failure
// closes the connection (v0 has no way to say why).
func (c *conn) rawAuthenticate() error {
	c.rawSASL = false
	body, err := c.readFrame(PreAuthRequestBytes, 1)
	if err != nil {
		return err
	}
	if _, err := c.authenticate(body, c.sasl == saslReauth); err != nil {
		return err
	}
	return c.writeRaw([]byte{0, 0, 0, 0})
}

func handleSASLAuthenticate(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.SASLAuthenticateRequest)
	resp := req.ResponseKind().(*kmsg.SASLAuthenticateResponse)
	if c.sasl != saslHandshook && c.sasl != saslReauth {
		return nil, fmt.Errorf("%w: authenticate without a handshake before it", errSASL)
	}
	reauth := c.sasl == saslReauth
	p, err := c.authenticate(req.SASLAuthBytes, reauth)
	if errors.Is(err, errUnvouched) {
		return nil, err // closed unanswered: the client retries
	}
	if err != nil {
		msg := err.Error()
		resp.ErrorCode = kerr.SaslAuthenticationFailed.Code
		resp.ErrorMessage = &msg
		c.closeAfter = true
		return resp, nil
	}
	if req.Version >= 1 {
		resp.SessionLifetimeMillis = max(time.Until(c.reauthWithin(p)).Milliseconds(), 1)
	}
	return resp, nil
}

// reauthWithin shortens the session of p, just authenticated through a
// SaslAuthenticate v1+ (a client that re-authenticates, KIP-368), to
// ReauthMax (kafka_reauth_max) when its token lives longer, as Kafka's
// connections.max.reauth.ms: the client is told so and re-authenticates
// by then, else its connection is closed then (armExpiryLocked). So
// every connection of a client presents its token provider's latest
// token within ReauthMax, which bounds how long a fetch connection of a
// renewed credential waits for its group connection's carry-over
// (groups.renewalPending). v0 clients cannot re-authenticate and keep
// the token's expiry. It returns the session's end.
func (c *conn) reauthWithin(p *Principal) time.Time {
	end := p.Expires
	if by := time.Now().Add(c.s.cfg.ReauthMax); c.s.cfg.ReauthMax > 0 && by.Before(end) {
		end = by
		c.s.mu.Lock()
		if _, open := c.s.conns[c]; open {
			c.s.armExpiryLocked(c, end)
		}
		c.s.mu.Unlock()
	}
	c.reauthBy = end
	return end
}

// authenticate checks a mechanism's initial response and makes its token
// the connection's principal.
func (c *conn) authenticate(msg []byte, reauth bool) (*Principal, error) {
	if c.s.cfg.needsCertificate() && !c.s.cfg.Consumers.Allows(c.tlsState()) {
		return nil, errors.New("client_certificate_required: this listener needs a client certificate signed by the client CA with an allowed name")
	}
	token, err := bearerOf(c.mechanism, msg)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	p, err := c.s.auth.Authenticate(token, c.remote, now)
	if err != nil {
		if code := c.s.gate.CheckClient(&ocap.Claims{}, now); api.IsRetriable(code) {
			return nil, fmt.Errorf("%w (%s): %v", errUnvouched, code, err)
		}
		return nil, tokenRefused{msg: "token refused: " + identity.Reason(err) + opaqueTokenHint(token, err), err: err}
	}
	if reauth && !c.principal.sameIdentity(p) {
		return nil, errors.New("re-authentication must keep the identity of the session")
	}
	if err := c.s.claimIdentity(c, p); err != nil {
		return nil, err
	}
	var before clientKey
	proof := ""
	if reauth {
		before, proof = c.key(), c.principal.renewalProof(p, now)
	}
	c.principal, c.sasl, c.reauthBy = p, saslDone, p.Expires
	c.authed.Store(true)
	if reauth && !p.capability() {
		c.s.groups.carryOver(before, c.key(), p.Token, proof, p.Expires)
	}
	c.s.log.Debug("kafka connection authenticated", c.logFields(reauth)...)
	return p, nil
}

// tlsState is the connection's TLS state, nil in plaintext.
func (c *conn) tlsState() *tls.ConnectionState {
	tc, ok := c.nc.(interface{ ConnectionState() tls.ConnectionState })
	if !ok {
		return nil
	}
	cs := tc.ConnectionState()
	return &cs
}

// bearerOf extracts the token from a mechanism's initial response.
func bearerOf(mechanism string, msg []byte) (string, error) {
	var token string
	var err error
	switch mechanism {
	case mechPlain:
		token, err = plainPassword(msg)
	case mechOAuthBearer:
		token, err = oauthBearerToken(msg)
	default:
		err = errors.New("no mechanism chosen")
	}
	if err == nil && token == "" {
		err = errors.New("empty token")
	}
	return token, err
}

// plainPassword parses RFC 4616 "[authzid] NUL authcid NUL passwd".
func plainPassword(msg []byte) (string, error) {
	parts := bytes.Split(msg, []byte{0})
	if len(parts) != 3 {
		return "", errors.New("PLAIN message must be authzid NUL user NUL password")
	}
	if len(parts[0]) > 0 && !bytes.Equal(parts[0], parts[1]) {
		return "", errors.New("PLAIN authzid must be empty or equal the user name")
	}
	return string(parts[2]), nil
}

// oauthBearerToken parses the RFC 7628 client initial response:
// gs2 header ("n,," or "n,a=authzid,"), then \x01-separated key=value
// pairs ending with \x01\x01, one of which is "auth=Bearer <token>".
func oauthBearerToken(msg []byte) (string, error) {
	s := string(msg)
	gs2, rest, ok := strings.Cut(s, "\x01")
	if !ok || !strings.HasPrefix(gs2, "n,") || !strings.HasSuffix(gs2, ",") || strings.Count(gs2, ",") != 2 {
		return "", errors.New("OAUTHBEARER message must start with the gs2 header n,[a=authzid],")
	}
	if !strings.HasSuffix(rest, "\x01\x01") {
		return "", errors.New("OAUTHBEARER message must end with \\x01\\x01")
	}
	var token string
	for _, kv := range strings.Split(strings.TrimSuffix(rest, "\x01\x01"), "\x01") {
		key, value, ok := strings.Cut(kv, "=")
		if !ok {
			return "", errors.New("OAUTHBEARER pairs must be key=value")
		}
		if key != "auth" {
			continue // host, port and SASL extensions are not used
		}
		scheme, t, ok := strings.Cut(value, " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || token != "" {
			return "", errors.New("OAUTHBEARER needs exactly one auth=Bearer <token>")
		}
		token = strings.TrimSpace(t)
	}
	return token, nil
}

// opaqueTokenHint is what to use instead of a token with no dot in it —
// capgate's admin and sync tokens are such: `sasl.password` set to
// $CAPGATE_ADMIN_TOKEN read "malformed token: 3 dot-separated segments
// … expected, got 1" and no more (newuser9) — "" for any other refusal.
func opaqueTokenHint(token string, err error) string {
	if !errors.Is(err, ocap.ErrMalformed) || strings.Contains(token, ".") {
		return ""
	}
	return " (an opaque token, as capgate's admin and sync tokens are, is not for Kafka clients: use a client credential — capgate dev's CAPGATE_CREDENTIAL, capgate admin client-credential —, a capability or an IdP token)"
}

// tokenRefused is a SASL token's refusal: its message says "token
// refused" once (identity's sentinel, "identity: token refused: …", made
// it "token refused: identity: token refused: …"), and it still wraps the
// cause for errors.Is.
type tokenRefused struct {
	msg string
	err error
}

func (e tokenRefused) Error() string { return e.msg }
func (e tokenRefused) Unwrap() error { return e.err }
