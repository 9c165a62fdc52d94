package authz

import (
	"strings"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// QoS returns the service settings in force for capability c at now: the
// capability's own qos claim, with each field (log level, monitor tag,
// byte rate) replaced by the most specific live override that sets it.
// Specificity ranks selector fields jti > holder > partition > topic >
// group and adds them up (a holder is HolderID's); ties go to the greater override ID. A selector
// with no field set matches nothing. A jti selector also matches the
// capabilities chained from that jti. Does not allocate.
func (v *View) QoS(c *ocap.Claims, now time.Time) ocap.QoS {
	q, _ := v.service(c, now)
	return q
}

// RateOverride is the ID of the live override that sets c's byte rate at
// now, or "" when c's rate is its own (its qos claim, or none). The
// gateway charges a rate set by an override to one budget per override
// (every capability its selector matches shares it) and a capability's
// own rate to the root of its chain (ocap.Claims.Root), so attenuating
// never multiplies a budget. Does not allocate.
func (v *View) RateOverride(c *ocap.Claims, now time.Time) string {
	_, id := v.service(c, now)
	return id
}

// service is QoS, and the ID of the override that set the byte rate.
func (v *View) service(c *ocap.Claims, now time.Time) (ocap.QoS, string) {
	var q ocap.QoS
	if c.QoS != nil {
		q = *c.QoS
	}
	if v.qosCount.Load() == 0 {
		return q, ""
	}
	n := now.Unix()
	var lvl, mon, bps best
	v.mu.RLock()
	defer v.mu.RUnlock()
	for id, o := range v.qos {
		score := specificity(o.Selector, c)
		if score == 0 || n >= o.Until {
			continue
		}
		if o.LogLevel != "" && lvl.beats(score, id) {
			lvl, q.LogLevel = best{score, id}, o.LogLevel
		}
		if o.Monitor != "" && mon.beats(score, id) {
			mon, q.Monitor = best{score, id}, o.Monitor
		}
		if o.MaxBytesPerSec != 0 && bps.beats(score, id) {
			bps, q.MaxBytesPerSec = best{score, id}, o.MaxBytesPerSec
		}
	}
	return q, bps.id
}

type best struct {
	score int
	id    string
}

func (b best) beats(score int, id string) bool {
	return score > b.score || score == b.score && id > b.id
}

// specificity is 0 when s does not match c (or sets nothing), else the sum
// of the weights of the fields it sets.
func specificity(s api.QoSSelector, c *ocap.Claims) int {
	score := 0
	for _, f := range [...]struct {
		set, match bool
		weight     int
	}{
		{s.Group != "", s.Group == c.Group, 1},
		{s.Topic != "", s.Topic == c.Topic, 2},
		{s.Partition != nil, s.Partition != nil && *s.Partition == c.PartitionNumber(), 4},
		{s.Holder != "", s.Holder == HolderID(c), 8},
		{s.JTI != "", s.JTI != "" && matchesJTI(s.JTI, c), 16},
	} {
		if !f.set {
			continue
		}
		if !f.match {
			return 0
		}
		score += f.weight
	}
	return score
}

// HolderID is what a QoS selector's holder names in c: a capability's
// sub — its member's id, or an admin grant's or lease's holder, both
// chosen by the coordinator or the operator — and for a client
// principal (a client credential, or the Kafka listener's IdP identity,
// whose claims carry grps/tps as no capability does) its tenant, what
// only its holder presents: an OAuth client's "oauth:<client_id>" (its
// every token), an admin-minted credential's jti (the id `admin group`
// shows as its members' credential, the one revoke-capability takes),
// an IdP identity's id (issuer and subject, hashed). Never a
// credential's sub: an admin-minted credential's is its free --name,
// which two tenants' credentials may share, so one tenant's
// same-named credential shared (and could drain) the rate an operator
// set for another, or enjoyed its higher one (redteam20); an IdP's
// subject is unique only within its issuer.
func HolderID(c *ocap.Claims) string {
	client := c.Kind() == ocap.KindClient || c.Kind() == "" && (len(c.Groups) > 0 || len(c.Topics) > 0)
	switch {
	case !client:
		return c.Subject
	case c.Kind() == ocap.KindClient && strings.HasPrefix(c.Subject, oauthSubject):
		return c.Subject
	}
	return c.ID
}

// oauthSubject starts the sub of a credential the coordinator's token
// endpoint minted: "oauth:<client_id>", one per OAuth client.
const oauthSubject = "oauth:"

func matchesJTI(jti string, c *ocap.Claims) bool {
	if c.ID == jti {
		return true
	}
	for _, a := range c.Chain {
		if a == jti {
			return true
		}
	}
	return false
}
