package kafkaproto

import (
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// admission is the verdict on one partition of a request.
type admission struct {
	claims    *ocap.Claims
	req       authz.Request
	code      api.Code // "" when admitted
	allowance int64    // bytes the capability's rate still allows, -1: no rate
	throttle  time.Duration
	// renewing: refused (capability_revoked) because the client's member
	// is being renewed onto its new credential and the partition comes
	// back to it (member.renewing), because its capability is fenced by
	// the member's carry-over onto the client's renewed credential and
	// the regrant is on its way (member.refencePending), or because the
	// client is being told to give the partition up and take it again
	// from its committed offset (member.retell: an administrator's
	// offsets reset): a Fetch answers it empty, throttled
	// (renewThrottle), not NOT_LEADER_OR_FOLLOWER, on which KafkaJS
	// refreshes its metadata and rejoins the group, reading again from
	// its committed offsets.
	renewing bool
}

// admit finds the capability that covers topic/partition for op on this
// connection and runs the gateway's admission on it (sync state, expiry,
// fence, deny-list, revoked member, topic/partition/op/offset, byte rate).
//
//   - A capability connection uses its own capability (assign mode).
//   - A client-credential connection uses the capability of the member of
//     this gateway that holds the partition for this client (see
//     groups.capability): none held answers forbidden when the client has
//     no member here at all (a zombie whose session ended), and
//     capability_revoked when it has one that does not hold the partition
//     (now): its assignment is changing under it.
func (c *conn) admit(topic string, partition int32, op ocap.Op, offset int64, now time.Time) admission {
	a := admission{req: authz.Request{Topic: topic, Partition: partition, Op: op, Offset: offset}, allowance: -1}
	var paused bool // the member's fetches of it pause rather than fail
	if c.principal.capability() {
		a.claims = c.principal.Claims
	} else {
		var token string
		var member bool
		token, member, paused = c.s.groups.capability(c.key(), topic, partition)
		if token == "" {
			a.code = api.CodeForbidden
			switch {
			case member:
				a.code, a.renewing = api.CodeCapabilityRevoked, paused
			case op == ocap.OpFetch && c.principal.Claims.AllowsTopic(topic) && !c.s.internalTopic(topic) && c.s.groups.renewalPending(c.holderKey(), c.principal.Claims.ID, c.principal.Expires, now):
				// A renewed credential's connection before its carry-over
				// (groups.renewalPending), allowed the topic itself: a
				// holder of the name without that right is refused.
				a.code, a.renewing = api.CodeCapabilityRevoked, true
			case op == ocap.OpFetch && c.principal.Claims.AllowsTopic(topic) && !c.s.internalTopic(topic):
				c.sayFetchOutsideAGroup(topic)
			}
			return a
		}
		claims, err := c.s.gate.VerifyCapability([]byte(token), c.remote, now)
		if err != nil {
			a.code = api.CodeCapabilityRevoked // a held capability that no longer verifies: expired or key retired
			return a
		}
		a.claims = claims
	}
	a.code, a.allowance, a.throttle = c.s.gate.Admit(a.claims, a.req, now)
	a.renewing = paused && a.code == api.CodeCapabilityRevoked // fenced by its carry-over: the regrant comes
	if a.code == "" && op == ocap.OpFetch && rangeLimited(a.claims) {
		// Kafka answers whole record batches, which could carry records
		// outside the range; the gateway never re-encodes batches.
		a.code = api.CodeForbidden
	}
	return a
}

// renewing reports whether p, admitted before and refused now
// (capability_revoked: the renewal released it, or a carry-over fenced
// it), pauses for this client's member (admission.renewing): a Fetch in
// flight when the renewal or the carry-over began is answered empty, not
// NOT_LEADER_OR_FOLLOWER.
func (c *conn) renewing(p *fetchPart, code api.Code) bool {
	if code != api.CodeCapabilityRevoked || c.principal.capability() {
		return false
	}
	_, _, renewing := c.s.groups.capability(c.key(), p.topic, p.partition)
	return renewing
}

// renewThrottle is how long a client is told to wait before it fetches
// again a partition its member is renewing (a leave and a join: a few
// coordinator round trips).
const renewThrottle = 50 * time.Millisecond

// rangeLimited reports a capability whose offset range is narrower than
// the whole partition.
func rangeLimited(c *ocap.Claims) bool {
	return c.Offsets != nil && (c.Offsets.From > 0 || c.Offsets.To != 0)
}

// clientKey names the Kafka client a client-credential connection belongs
// to: its credential's issuer and holder (Principal.tenant: the
// credential itself, its OAuth client or its IdP identity — never the
// credential's name, which another holder's may share), its client.id
// (as kept: keptClientID, at most 271 bytes whatever was sent) and its
// address. A Kafka Fetch carries no group member identity, so this
// is how a fetch finds the member whose capability covers it. Kafka
// itself describes group members by the same client id and host. The
// connections of one client (a Kafka client opens several, each
// authenticating with the same credential) share their members' fetch
// rights on this gateway; so do consumers sharing all four: give each
// consumer instance its own client.id (or credential) for per-member
// fencing of fetches. A member is reachable by more than the key it was
// opened under once a connection of that key re-authenticated with a
// renewed credential of the same name (groups.carryOver).
type clientKey struct {
	issuer   string // capgate's, or an IdP's: the same sub at two issuers is two clients
	tenant   string
	clientID string
	ip       string
}

func (c *conn) key() clientKey {
	return clientKey{issuer: c.principal.Claims.Issuer, tenant: c.principal.tenant(), clientID: c.clientID, ip: c.remoteIP}
}

// holderKey is the connection's holderKey (groups.renewalPending).
func (c *conn) holderKey() holderKey {
	return holderKey{issuer: c.principal.Claims.Issuer, subject: c.principal.Claims.Subject, clientID: c.clientID, ip: c.remoteIP}
}
