package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

func TestErrorClassification(t *testing.T) {
	for _, tc := range []struct {
		err                    error
		retriable, unknown, na bool
	}{
		{kerr.UnknownTopicOrPartition, false, true, false},
		{kerr.UnknownTopicID, false, true, false},
		{kerr.NotLeaderForPartition, true, false, true},
		{kerr.FencedLeaderEpoch, true, false, true},
		{kerr.RequestTimedOut, true, false, true},
		{kerr.UnknownServerError, false, false, false},
		{kerr.TopicAuthorizationFailed, false, false, false},
		{fmt.Errorf("dial: %w", io.EOF), true, false, true},
		// Our own pool's Close (TestCloseEndsFetchesInFlight failed
		// once in CI: a Close racing a fetch about to take a connection
		// was classified retriable).
		{ErrClosed, false, false, false},
	} {
		be := newBrokerError("fetch", tc.err)
		if be.Retriable != tc.retriable || errors.Is(be, ErrUnknownTopicOrPartition) != tc.unknown ||
			errors.Is(be, ErrBrokerUnavailable) != tc.na || !errors.Is(be, tc.err) {
			t.Errorf("%v: retriable %v unknown %v unavailable %v", tc.err, be.Retriable,
				errors.Is(be, ErrUnknownTopicOrPartition), errors.Is(be, ErrBrokerUnavailable))
		}
	}
	if err := wrapError("fetch", context.Canceled); !errors.Is(err, context.Canceled) {
		t.Errorf("context error lost: %v", err)
	}
	var be *BrokerError
	if err := wrapError("fetch", context.Canceled); errors.As(err, &be) {
		t.Errorf("context error became a BrokerError: %v", err)
	}
	oor := &OffsetOutOfRangeError{Offset: 9, Earliest: 1, Latest: 5}
	if err := wrapError("fetch", oor); err != oor || err.Error() != "broker: offset 9 out of range [1, 5]" {
		t.Errorf("out of range: %v", err)
	}
	if got := newBrokerError("produce", kerr.NotLeaderForPartition).Error(); got != "broker: produce: "+kerr.NotLeaderForPartition.Error() {
		t.Errorf("message: %s", got)
	}
}

// Public never passes on a transport error's text (the brokers'
// addresses) nor a broker's free message beside its code.
func TestPublicNamesNoBroker(t *testing.T) {
	dial := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 0, 0, 7), Port: 9092}, Err: errors.New("connect: connection refused")}
	for _, c := range []struct {
		err  error
		want string
	}{
		{newBrokerError("fetch", fmt.Errorf("unable to dial: %w", dial)), "broker: fetch: no Kafka broker reached, or its answer could not be read (the log says which and why)"},
		{newBrokerError("produce", fmt.Errorf("%w: %s", kerr.NotEnoughReplicas, "replica 10.0.0.7 is down")), "broker: produce: Kafka answered NOT_ENOUGH_REPLICAS"},
		{wrapError("metadata", context.DeadlineExceeded), "broker: Kafka did not answer in time"},
		{&OffsetOutOfRangeError{Offset: 9, Earliest: 1, Latest: 5}, "broker: offset 9 out of range [1, 5]"},
	} {
		if got := Public(c.err); got != c.want || strings.Contains(got, "10.0.0.7") {
			t.Errorf("Public(%v) = %q, want %q", c.err, got, c.want)
		}
	}
}
