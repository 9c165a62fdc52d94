package kafkaproto

// Behavior: FindCoordinator v0–v4.
//
//   - A group's coordinator is the gateway asked: it runs the capgate
//     sessions of the members that join through it (see metadata.go for
//     why a client-credential connection is told the cluster is this
//     gateway). Only client credentials whose grps claim allows the group
//     get an answer; others GROUP_AUTHORIZATION_FAILED.
//   - Transaction coordinators: TRANSACTIONAL_ID_AUTHORIZATION_FAILED
//     (transactions are not offered through capgate).

import (
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
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
// client credential allowing it, still valid; else the Kafka error.
func (c *conn) groupAllowed(group string, now time.Time) int16 {
	p := c.principal
	if p.capability() || !p.Claims.AllowsGroup(group) {
		return kerr.GroupAuthorizationFailed.Code
	}
	if code := c.s.gate.CheckClient(p.Claims, now); code != "" {
		if api := partitionErrors[code]; api != nil && api.Retriable {
			return kerr.CoordinatorNotAvailable.Code
		}
		return kerr.GroupAuthorizationFailed.Code
	}
	return 0
}
