package kafkaproto

// Behavior: FindCoordinator v0–v4.
//
//   - A group's coordinator is the gateway asked: it runs the capgate
//     sessions of the members that join through it (see metadata.go for
//     why a client-credential connection is told the cluster is this
//     gateway). Only client credentials whose grps claim allows the group
//     get an answer; others GROUP_AUTHORIZATION_FAILED. A group id no
//     capgate group can have (ocap.ValidName: "." and "..", a '/', a
//     space, over 255 bytes) is INVALID_GROUP_ID, on every group API.
//   - Transaction coordinators: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//     (transactions are not offered through capgate), logged at warn
//     (sayTransactionsRefused): KafkaJS reports it only as "Failed to
//     find group coordinator".

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

func handleFindCoordinator(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.FindCoordinatorRequest)
	resp := req.ResponseKind().(*kmsg.FindCoordinatorResponse)
	self := c.s.nodes[c.s.self]
	answer := func(key string) int16 {
		switch req.CoordinatorType {
		case 0:
			return c.groupAllowed(key, time.Now())
		case 1:
			c.sayTransactionsRefused(key)
			return kerr.TransactionalIDAuthorizationFailed.Code
		}
		return kerr.InvalidRequest.Code
	}
	if req.Version < 4 {
		resp.ErrorCode = answer(req.CoordinatorKey)
		if resp.ErrorCode == 0 {
			resp.NodeID, resp.Host, resp.Port = self.id, self.host, self.port
		}
		return resp, nil
	}
	for _, key := range req.CoordinatorKeys {
		rc := kmsg.NewFindCoordinatorResponseCoordinator()
		rc.Key, rc.NodeID, rc.Port = key, -1, -1
		if rc.ErrorCode = answer(key); rc.ErrorCode == 0 {
			rc.NodeID, rc.Host, rc.Port = self.id, self.host, self.port
		}
		resp.Coordinators = append(resp.Coordinators, rc)
	}
	return resp, nil
}

// groupAllowed is 0 when this connection may take part in group: a
// client credential allowing it, still valid; else the Kafka error:
// COORDINATOR_NOT_AVAILABLE while the gateway cannot vouch for its view
// (capgate's retriable codes: the client retries), and
// GROUP_AUTHORIZATION_FAILED for a credential denied, expired or not
// allowing the group — final, as Kafka answers a principal without the
// ACL; a retriable answer would have the client retry for ever.
func (c *conn) groupAllowed(group string, now time.Time) int16 {
	if !ocap.ValidName(group) {
		// No capgate group can have this name (see ocap.ValidName): the
		// coordinator's routes could never reach it. Final, as Kafka's
		// own answer to an empty group id.
		return kerr.InvalidGroupID.Code
	}
	p := c.principal
	if p.capability() || !p.Claims.AllowsGroup(group) {
		return kerr.GroupAuthorizationFailed.Code
	}
	if code := c.checkClient(now); code != "" {
		if api.IsRetriable(code) {
			return kerr.CoordinatorNotAvailable.Code
		}
		return kerr.GroupAuthorizationFailed.Code
	}
	return 0
}

// checkClient decides whether the connection's client credential is
// still good now: "" when it is, a retriable code while the gateway
// cannot vouch for its view, else forbidden (denied, expired). A
// credential's refusal is final, as Kafka's for a principal without the
// ACL: answered as a retriable error (NOT_LEADER_OR_FOLLOWER for a
// partition) it would have the client retry for ever.
func (c *conn) checkClient(now time.Time) api.Code {
	code := c.s.gate.CheckClient(c.principal.Claims, now)
	if code == "" || api.IsRetriable(code) {
		return code
	}
	return api.CodeForbidden
}
