package kafkaproto

import (
	"context"
	"net/netip"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/broker"
	"github.com/capgate/capgate/gateway/authz"
	"github.com/capgate/capgate/ocap"
)

// Gate is what the listener uses of the gateway it runs in: the same
// admission the HTTP fetch path uses (verified-token cache, fence raise,
// sync state, authz.Decide, byte rates), the in-flight registry a
// revocation cancels and waits for, and the broker client. The gateway
// implements it over its own internals (gateway/kafka.go); the listener
// never keeps a second copy of any of them.
type Gate interface {
	// VerifyCapability verifies a capability token (cache first; a first
	// verification above the fence raises it). from is the client's
	// address: its failed verifications are budgeted (gateway
	// auth_failures_per_second).
	VerifyCapability(token []byte, from netip.Addr, now time.Time) (*ocap.Claims, error)
	// VerifyClient verifies a client credential and checks it against
	// the deny-list of the gateway's view; from as for VerifyCapability.
	VerifyClient(token string, from netip.Addr, now time.Time) (*ocap.Claims, error)
	// CheckClient decides whether a client credential verified earlier
	// is still good now: not expired, not denied, and the gateway in sync.
	// The sync state comes first: while the gateway cannot vouch for its
	// view it answers that retriable code whatever the claims (the
	// listener asks it so with empty claims after a token failed).
	CheckClient(c *ocap.Claims, now time.Time) api.Code
	// Admit decides whether c may serve req now: sync state, Decide, then
	// the capability's byte rate. It returns the refusal code ("" when
	// admitted), the bytes the rate still allows (-1: no rate) and how
	// long to throttle when the rate is exhausted.
	Admit(c *ocap.Claims, req authz.Request, now time.Time) (code api.Code, allowance int64, throttle time.Duration)
	// AdmitRate admits c's next bytes under the byte rate of its QoS: a
	// client credential's (or IdP identity's) produce to one partition,
	// c scoped to it (scopedTo), as the HTTP produce admits it. It
	// returns how long to throttle when the rate is exhausted, 0 when
	// admitted (or no rate applies).
	AdmitRate(c *ocap.Claims, now time.Time) (throttle time.Duration)
	// Recheck is the decision taken again after the broker answered,
	// before any byte is written: Decide and the sync state.
	Recheck(c *ocap.Claims, req authz.Request, now time.Time) api.Code
	// Track registers an in-flight fetch (or produce) of req under c. A
	// revocation cancels ctx and waits until done is called, which must
	// happen once the answer for it is decided (and never twice); a
	// produce ignores ctx (a write is never cancelled on its way) and
	// calls done once Kafka answered. A bounded one (one that asks Kafka)
	// counts against the gateway's in-flight caps: over one, nothing is
	// registered and code says which (overloaded, too_many_fetches).
	Track(base context.Context, c *ocap.Claims, req authz.Request, bounded bool) (ctx context.Context, done func(), code api.Code)
	// Hold counts n bytes of an answer about to be written against what
	// the gateway holds for its clients (in all, and for c's holder):
	// release gives them back once written. Over a cap nothing is counted
	// and code says which (overloaded, too_many_fetches).
	Hold(c *ocap.Claims, n int) (release func(), code api.Code)
	// HoldAnswer counts n bytes of another answer about to be written (an
	// admin read's, Metadata's: anything but a Fetch's records) for c's
	// holder whatever they come to — it must be sent; release gives them
	// back once written. AnswerRoom is Hold's refusal of any answer for
	// c now ("" while there is room): asked before a read builds one.
	HoldAnswer(c *ocap.Claims, n int) (release func())
	AnswerRoom(c *ocap.Claims) api.Code
	// Observe records one partition's outcome of op: metrics, and on
	// success the bytes against c's byte rate. c is nil when no
	// capability covered the partition.
	Observe(c *ocap.Claims, op string, code api.Code, bytes int, now time.Time)
	// Broker is the gateway's Kafka client.
	Broker() *broker.Client
}

// The op labels the listener reports outcomes under.
const (
	OpFetch   = "kafka_fetch"
	OpProduce = "kafka_produce"
	// OpRequest counts whole requests refused before any partition is
	// looked at (over kafka_max_request_partitions: limit_exceeded).
	OpRequest = "kafka_request"
)
