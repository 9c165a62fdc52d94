package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
)

// Sentinels for errors.Is. A *BrokerError matches them too: one whose Err
// is UNKNOWN_TOPIC_OR_PARTITION (or UNKNOWN_TOPIC_ID) is
// ErrUnknownTopicOrPartition, and one caused by an unreachable broker or a
// partition without a usable leader is ErrBrokerUnavailable.
var (
	ErrUnknownTopicOrPartition = errors.New("broker: unknown topic or partition")
	ErrBrokerUnavailable       = errors.New("broker: broker unavailable")
	ErrClosed                  = errors.New("broker: client closed")
)

// OffsetOutOfRangeError is Fetch's answer to an offset outside
// [Earliest, Latest]; test for it with errors.As.
type OffsetOutOfRangeError struct {
	Offset   int64 // the offset that was asked for
	Earliest int64 // log start offset
	Latest   int64 // high watermark: the next offset to be written
}

func (e *OffsetOutOfRangeError) Error() string {
	return fmt.Sprintf("broker: offset %d out of range [%d, %d]", e.Offset, e.Earliest, e.Latest)
}

// BrokerError is any failure that comes from Kafka or the way to it: a kerr
// error code in a response, or a transport error. Retriable says whether the
// same call may succeed later as is (kerr's table for error codes, true for
// transport errors).
type BrokerError struct {
	Op        string // "fetch", "produce", "metadata", "list offsets", "commit offsets"
	Err       error
	Retriable bool
}

func (e *BrokerError) Error() string { return "broker: " + e.Op + ": " + e.Err.Error() }

// Unwrap returns the kerr or transport error.
func (e *BrokerError) Unwrap() error { return e.Err }

// Is maps the underlying error onto ErrUnknownTopicOrPartition and
// ErrBrokerUnavailable.
func (e *BrokerError) Is(target error) bool {
	switch target {
	case ErrUnknownTopicOrPartition:
		return errors.Is(e.Err, kerr.UnknownTopicOrPartition) || errors.Is(e.Err, kerr.UnknownTopicID)
	case ErrBrokerUnavailable:
		return isUnavailable(e.Err)
	}
	return false
}

// newBrokerError classifies err for op. Retriable follows kerr's table,
// except that an unknown topic or partition is final: we only report it
// after fresh metadata said so, while kerr marks it retriable because it
// can be transient right after a topic is created.
func newBrokerError(op string, err error) *BrokerError {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		retriable := ke.Retriable && ke != kerr.UnknownTopicOrPartition && ke != kerr.UnknownTopicID
		return &BrokerError{Op: op, Err: err, Retriable: retriable}
	}
	// Closed is final whichever client noticed: franz-go's, or our own
	// pool's ErrClosed (a Close racing a fetch that was about to take a
	// connection was reported retriable).
	closed := errors.Is(err, kgo.ErrClientClosed) || errors.Is(err, ErrClosed)
	return &BrokerError{Op: op, Err: err, Retriable: !closed}
}

// isUnavailable reports whether err means no usable broker or leader was
// reached: transport errors and the leader-missing codes.
func isUnavailable(err error) bool {
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.BrokerNotAvailable, kerr.LeaderNotAvailable, kerr.NotLeaderForPartition,
			kerr.ReplicaNotAvailable, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch,
			kerr.KafkaStorageError, kerr.NetworkException, kerr.RequestTimedOut:
			return true
		}
		return false
	}
	return !errors.Is(err, ErrClosed)
}

// isLeaderError reports whether err means our idea of the partition leader
// is stale, or the leader cannot be reached: refresh metadata and retry.
func isLeaderError(err error) bool {
	var be *BrokerError
	if errors.As(err, &be) {
		return false // already judged, e.g. records that do not decode
	}
	var ke *kerr.Error
	if errors.As(err, &ke) {
		switch ke {
		case kerr.NotLeaderForPartition, kerr.FencedLeaderEpoch, kerr.UnknownLeaderEpoch,
			kerr.LeaderNotAvailable, kerr.ReplicaNotAvailable, kerr.BrokerNotAvailable,
			kerr.KafkaStorageError, kerr.NetworkException:
			return true
		}
		return false
	}
	if isContextError(err) || errors.Is(err, ErrClosed) || errors.Is(err, kgo.ErrClientClosed) {
		return false
	}
	return kgo.IsRetryableBrokerErr(err) || isTransportError(err)
}

// isStaleTopicError reports answers that may only mean our cached topic id
// or partition count is out of date.
func isStaleTopicError(err error) bool {
	return errors.Is(err, kerr.UnknownTopicOrPartition) || errors.Is(err, kerr.UnknownTopicID) ||
		errors.Is(err, kerr.InconsistentTopicID)
}

// isTransportError reports errors that are not Kafka answers at all.
func isTransportError(err error) bool {
	var ke *kerr.Error
	return !errors.As(err, &ke) && !isContextError(err)
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}

// Public is what a tenant is told of err, a failure of a call to Kafka:
// the operation and Kafka's error code name (kerr's fixed text), an
// offset out of range as it is — never a transport error's text, which
// names the brokers' addresses (dial tcp 10.0.0.7:9092: …), nor the free
// error message a broker may add to a code. The gateways and the
// coordinator answered err.Error() in 502/503 bodies, so any capability
// holder learned the fleet's addresses from an outage (redteam12 #3); log
// err itself for the operator.
func Public(err error) string {
	var oor *OffsetOutOfRangeError
	if errors.As(err, &oor) {
		return oor.Error()
	}
	prefix := "broker: "
	var be *BrokerError
	if errors.As(err, &be) {
		prefix += be.Op + ": "
	}
	var ke *kerr.Error
	switch {
	case errors.As(err, &ke):
		return prefix + "Kafka answered " + ke.Message
	case isContextError(err):
		return prefix + "Kafka did not answer in time"
	case errors.Is(err, ErrClosed) || errors.Is(err, kgo.ErrClientClosed):
		return prefix + "the Kafka client is closed"
	case errors.Is(err, ErrUnknownTopicOrPartition):
		return ErrUnknownTopicOrPartition.Error()
	}
	return prefix + "no Kafka broker reached, or its answer could not be read (the log says which and why)"
}
