package kafkaproto

// Behavior: DescribeCluster v0–v2 (Java's Admin.describeCluster on a
// broker that lists it, KIP-700) answers as Metadata does (metadata.go):
// the gateways (or, to a client credential, this gateway's fetch lanes)
// are the brokers, this gateway the controller, Metadata's cluster id (the gateway
// pool's audience). A
// request for the controllers (EndpointType 2) is
// UNSUPPORTED_ENDPOINT_TYPE, as a Kafka broker answers it. No authorized
// operations are given (INT32_MIN, "not asked"): capgate's rights are
// its tokens, not ACLs. It was absent from ApiVersions, so a client that
// asked for it was told the broker was too old (newuser12).

import (
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// endpointTypeControllers is DescribeCluster's EndpointType asking for
// the controllers (1 is the brokers).
const endpointTypeControllers = 2

func handleDescribeCluster(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.DescribeClusterRequest)
	resp := req.ResponseKind().(*kmsg.DescribeClusterResponse)
	resp.EndpointType = req.EndpointType
	if req.EndpointType == endpointTypeControllers {
		msg := "capgate's Kafka listener is a broker, not a controller: it describes its brokers (EndpointType 1)"
		resp.ErrorCode, resp.ErrorMessage = kerr.UnsupportedEndpointType.Code, &msg
		return resp, nil
	}
	for _, n := range c.brokers() {
		b := kmsg.NewDescribeClusterResponseBroker()
		b.NodeID, b.Host, b.Port = n.id, n.host, n.port
		resp.Brokers = append(resp.Brokers, b)
	}
	if c.s.cfg.ClusterID != nil {
		resp.ClusterID = c.s.cfg.ClusterID()
	}
	resp.ControllerID = c.s.nodes[c.s.self].id
	return resp, nil
}
