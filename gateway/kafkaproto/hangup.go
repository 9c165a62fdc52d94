package kafkaproto

// A connection reads one request at a time (conn.go), so while a handler
// runs nobody reads its socket, and a client that hung up is noticed only
// once its answer is written. For the calls that may run long on the
// coordinator's account — a member's first join, retried for up to
// request_timeout while the coordinator fails or cannot be reached, and
// the admin reads (OffsetFetch, ListGroups, ConsumerGroupDescribe) —
// watchHangUp reads the socket meanwhile: the end of the stream or an
// error ends the call's context at once (the join is cancelled, nothing
// joins or is read for a client that is gone); bytes that arrive instead
// (a request the client pipelined) are kept for the frame reader
// (conn.early) and end the watch — the client is there.
//
// A half-closed connection (the client's shutdown(SHUT_WR): it still
// reads) cannot be told from a closed one by its end of stream, so it
// ends the call too — a Kafka client never half-closes, and Kafka's
// broker closes a connection whose stream ended. But the request is still
// answered, as the gateway's HTTP side answers a half-closed long poll as
// if max_wait had passed: as if the coordinator could not be reached —
// the join COORDINATOR_NOT_AVAILABLE (its answer at request_timeout),
// OffsetFetch COORDINATOR_LOAD_IN_PROGRESS, ListGroups and
// ConsumerGroupDescribe COORDINATOR_NOT_AVAILABLE, all retriable; to a
// closed client the write simply fails. The connection then closes: the
// frame reader meets the same end of stream
// (TestHalfClosedWatchedRequestsAnswered).

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/capgate/capgate/api"
)

// earlyReadMax bounds what the watch reads ahead of the frame reader.
const earlyReadMax = 512

// joinMember joins m for this connection's client (groups.join); the
// join ends early when the client hangs up meanwhile.
func (c *conn) joinMember(m *member, join api.JoinRequest) (code api.Code, err error) {
	m.holder = c.holderKey()
	c.watchHangUp(func(ctx context.Context) {
		code, err = c.s.groups.join(ctx, m, c.principal.Token, join)
	})
	return code, err
}

// watchHangUp runs call with the connection's context, ended also when
// the client hangs up while call runs.
func (c *conn) watchHangUp(call func(ctx context.Context)) {
	ctx, cancel := context.WithCancel(c.ctx)
	defer cancel()
	if len(c.early) > 0 || c.nc.SetReadDeadline(time.Time{}) != nil {
		call(ctx) // a pipelined request is already waiting: the client is there
		return
	}
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		var buf [earlyReadMax]byte
		n, err := c.nc.Read(buf[:])
		c.early = append(c.early, buf[:n]...) // read by the frame reader once watched is closed
		if n == 0 && err != nil && !errors.Is(err, os.ErrDeadlineExceeded) {
			cancel() // end of stream, reset or closed: nobody waits for the answer
		}
	}()
	call(ctx)
	_ = c.nc.SetReadDeadline(time.Unix(1, 0)) // ends the watch's read; readFrame sets its own
	<-watched
}

// hungUp reports whether ctx (of a watchHangUp call) ended because the
// client hung up or the listener closes, not by a timeout.
func hungUp(ctx context.Context) bool { return errors.Is(context.Cause(ctx), context.Canceled) }

// takeEarly moves what watchHangUp read ahead into p; it returns how
// many bytes.
func (c *conn) takeEarly(p []byte) int {
	n := copy(p, c.early)
	c.early = c.early[n:]
	if len(c.early) == 0 {
		c.early = nil
	}
	return n
}
