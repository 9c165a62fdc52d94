package gateway

// Behavior: who may produce over HTTP. The bearer of
// POST /v1/topics/{topic}/partitions/{p}/records is a partition
// capability with the produce op (admitCapability), or a capgate client
// credential (typ capgate-client+jwt) admitted as the Kafka listener
// admits a credential's Produce:
//
//   - verified like every token (signature, issuer, audience, expiry;
//     a forged one is charged to the caller's failed-token budget, 429
//     past it), then its revocation: its jti and chain on the deny-list
//     refuse it 409 capability_revoked (authz.DecideCredential), an
//     expired one 401 token_expired;
//   - its ops hold produce and its tps claim names the topic itself
//     (ocap.Claims.MayProduceTo: a pattern, "*" or "orders-*", grants
//     consume only), else 403 forbidden naming what it covers; a topic no
//     client is served (Kafka's "__*", capgate-state*) is 403 whatever
//     it names. Every partition of a topic it names is covered.
//   - the byte rate and QoS that apply to it as to a capability: its own
//     budget (the credential's jti, budgetKey), or a live override whose
//     selector matches it (by holder = its tenant, authz.HolderID: its
//     jti, an OAuth client's "oauth:<client_id>", never its free name;
//     by jti; or by the topic and partition written: scoped); in flight
//     under the same
//     caps, its tenant being the credential (its jti; an OAuth client's
//     token: its sub "oauth:<client_id>"; tenantOf), never its free
//     name (redteam10 #1).
//   - once registered in flight it is decided again (a deny applied
//     meanwhile refuses it; a deny applied later waits for Kafka's
//     answer before its acknowledgement, authz.Refuses).
//
// A credential never fetches: the fetch route takes capabilities only
// (the handoff fences partitions by epoch, which a credential has not).
// A member token, or a JWT that is no capgate token (an IdP's), is
// refused 401 unverified, with a message saying what produces: IdP
// tokens produce through the Kafka listener (gateway.kafka_oidc, whose
// verifier and rules are the listener's; the HTTP API verifies no IdP
// token), not over HTTP.

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/internal/failguard"
	"github.com/capgate/capgate/ocap"
)

// admitProducer admits a produce to topic/partition under the request's
// bearer: a capability (admitCapability) or a client credential
// (admitCredential). On refusal it has answered and returns the code.
func (c *call) admitProducer(topic []byte, partition int32) api.Code {
	req := authz.Request{Partition: partition, Op: ocap.OpProduce, Offset: -1}
	token, _ := bearerToken(&c.ctx.Request.Header)
	kind, jwt := tokenKind(token)
	switch {
	case kind == ocap.KindClient:
		return c.admitCredential(token, topic, req)
	case kind == ocap.KindMember:
		return c.refuseBearer(memberCannotProduce)
	case jwt && kind == "":
		// A JWT that is no capgate token (an IdP's: typ JWT, at+jwt or
		// none) can never verify as a capability: refused unverified,
		// so a producer holding IdP tokens spends no failure budget.
		return c.refuseBearer(foreignCannotProduce)
	}
	_, code := c.admitCapability(topic, req)
	return code
}

const (
	memberCannotProduce  = "a member token cannot produce: produce with a client credential whose ops include produce and whose topics name the topic, or a capability with the produce op"
	foreignCannotProduce = "not a capgate token: an IdP (OIDC) token produces through the gateway's Kafka listener (gateway.kafka_oidc), not over HTTP; here produce with a capgate client credential whose ops include produce and whose topics name the topic, or a capability with the produce op"
)

// refuseBearer answers 401 with message for a bearer that never
// produces (once the gateway is in sync: a 503 says to retry first).
func (c *call) refuseBearer(message string) api.Code {
	if code := c.g.refuseUnsynced(c.ctx, c.start); code != "" {
		return code
	}
	writeError(c.ctx, api.CodeUnauthorized, message, nil)
	return api.CodeUnauthorized
}

// tokenKind is the kind a capgate token's JOSE header claims (its typ),
// unverified: it only picks the verifier, which checks typ again; ""
// for anything else. jwt reports a header that decodes to a JSON object
// with an alg (some JWT, capgate's or not).
func tokenKind(token []byte) (kind ocap.Kind, jwt bool) {
	head, _, ok := bytes.Cut(token, []byte("."))
	if !ok || len(head) > ocap.MaxTokenBytes {
		return "", false
	}
	raw, err := base64.RawURLEncoding.DecodeString(string(head))
	if err != nil {
		return "", false
	}
	var h struct {
		Alg string `json:"alg"`
		Typ any    `json:"typ"`
	}
	if json.Unmarshal(raw, &h) != nil || h.Alg == "" {
		return "", false
	}
	if typ, _ := h.Typ.(string); ocap.Kind(typ).Valid() {
		return ocap.Kind(typ), true
	}
	return "", true
}

// admitCredential admits a produce under the client credential token.
func (c *call) admitCredential(token, topic []byte, req authz.Request) api.Code {
	claims, code := c.credentialProducing(token, topic)
	if code != "" {
		return code
	}
	req.Topic = string(topic)
	c.claims, c.req = scoped(claims, req), req
	c.qos = c.g.view.QoS(c.claims, c.start)
	_, code = c.admitRate()
	return code
}

// credentialProducing checks sync, then that token is a client
// credential that verifies, is not revoked and may produce to topic (not
// an internal one): the checks of both produce routes before the byte
// rate. On refusal it has answered and returns the code.
func (c *call) credentialProducing(token, topic []byte) (*ocap.Claims, api.Code) {
	g, ctx, now := c.g, c.ctx, c.start
	if code := g.refuseUnsynced(ctx, now); code != "" {
		return nil, code
	}
	claims, code := c.verifyCredential(token)
	if code != "" {
		return nil, code
	}
	name := string(topic)
	if code := g.refuseInternalTopic(ctx, name); code != "" {
		return nil, code
	}
	if !claims.MayProduceTo(name) {
		writeError(ctx, api.CodeForbidden, credentialProduceRefusal(claims, name),
			map[string]any{"credential": map[string]any{"ops": claims.ClientOps().Names(), "topics": claims.Topics}})
		return nil, api.CodeForbidden
	}
	if code := c.decideCredential(claims); code != "" {
		return nil, code
	}
	return claims, ""
}

// scoped is a credential's claims as they apply to one produce: with
// the request's topic and partition, so that a QoS override selecting a
// topic or partition selects its produces there as it selects a
// capability's (and the debug trace names them). Its kind, jti, chain
// and expiry are the credential's: revocation judges it as the
// credential (authz.Refuses), and its rate budget is its jti's.
func scoped(claims *ocap.Claims, req authz.Request) *ocap.Claims {
	c := *claims
	c.Topic, c.Partition = req.Topic, &req.Partition
	return &c
}

// verifyCredential verifies a client credential as the Kafka listener
// does (kafkaGate.VerifyClient: the caller's failed-token budget, the
// verifier, the deny-list) and answers a refusal.
func (c *call) verifyCredential(token []byte) (*ocap.Claims, api.Code) {
	g, ctx, now := c.g, c.ctx, c.start
	claims, err := kafkaGate{g}.VerifyClient(string(token), g.callerAddr(caller{ctx: ctx}), now)
	var spent *failguard.Spent
	switch {
	case err == nil:
		return claims, ""
	case errors.As(err, &spent):
		setRetryAfter(ctx, spent.Wait)
		writeError(ctx, api.CodeRateLimited, err.Error()+" (gateway auth_failures_per_second)", nil)
		return nil, api.CodeRateLimited
	case errors.Is(err, errDeniedCredential):
		writeError(ctx, api.CodeCapabilityRevoked, "client credential is denied (capgate admin revoke-capability)", nil)
		return nil, api.CodeCapabilityRevoked
	case errors.Is(err, ocap.ErrExpired):
		writeError(ctx, api.CodeTokenExpired, err.Error(), nil)
		return nil, api.CodeTokenExpired
	}
	writeError(ctx, api.CodeUnauthorized, err.Error(), nil)
	return nil, api.CodeUnauthorized
}

// decideCredential runs the view's revocation checks on a credential
// (authz.DecideCredential: expiry, deny-list of its jti and chain) and
// answers a refusal.
func (c *call) decideCredential(claims *ocap.Claims) api.Code {
	switch r := authz.DecideCredential(claims, c.g.view, c.start); r {
	case authz.Allow:
		return ""
	case authz.Expired:
		writeError(c.ctx, r.Code(), "client credential expired: exp "+ocap.TimeText(claims.ExpiresAt, c.start), nil)
		return r.Code()
	default:
		writeError(c.ctx, r.Code(), "client credential is denied (capgate admin revoke-capability)", nil)
		return r.Code()
	}
}

// recheckProducer decides an admitted produce again once it is in
// flight: a revocation applied between admission and registration
// refuses it here (one applied later waits for it). On refusal it has
// answered and returns the code.
func (c *call) recheckProducer() api.Code {
	now := time.Now()
	if c.claims.Kind() == ocap.KindClient {
		if r := authz.DecideCredential(c.claims, c.g.view, now); r != authz.Allow {
			writeError(c.ctx, r.Code(), "client credential is "+r.String()+" (revoked while the produce was admitted); nothing was written", nil)
			return r.Code()
		}
		return ""
	}
	if r := authz.Decide(c.claims, c.req, c.g.view, now); r != authz.Allow {
		writeError(c.ctx, r.Code(), r.Message()+" (revoked while the produce was admitted); nothing was written", nil)
		return r.Code()
	}
	return ""
}

// credentialProduceRefusal says why a credential may not write to topic
// and what would.
func credentialProduceRefusal(c *ocap.Claims, topic string) string {
	if !c.ClientOps().Has(ocap.OpProduce) {
		return fmt.Sprintf("this client credential does not allow produce (its ops: %v): mint one with --ops consume,produce --topics %s (capgate admin client-credential)", c.ClientOps().Names(), topic)
	}
	if c.AllowsTopic(topic) {
		return "this client credential's topics cover " + strconv.Quote(topic) + " by a pattern, which grants consume only: produce needs the topic named exactly in --topics"
	}
	return fmt.Sprintf("this client credential does not name topic %q (its topics: %v): mint one with --ops consume,produce --topics %s (capgate admin client-credential)", topic, c.Topics, topic)
}

// credentialBodyLimit is bodyLimit for a client credential: max_body_bytes
// when it verifies (under the pre-auth check's one failure budget, the
// zero address) and may produce to some topic, else preauthBodyBytes.
// Credentials are not in the verified-token cache (it holds capabilities
// only), so a large produce under one is verified here and again by the
// route.
func (g *Gateway) credentialBodyLimit(token []byte, now time.Time) (int, *ocap.Claims) {
	c, err := kafkaGate{g}.VerifyClient(string(token), netip.Addr{}, now)
	if err != nil || !c.ProducesAnywhere() {
		return preauthBodyBytes, nil
	}
	return max(g.cfg.MaxBodyBytes, preauthBodyBytes), c
}
