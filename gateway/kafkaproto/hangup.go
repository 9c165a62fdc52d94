package kafkaproto

// A connection reads one request at a time (conn.go), so while a handler
// runs nobody reads its socket, and a client that hung up is noticed only
// once its answer is written. For the one call that may run long on the
// coordinator's account — a member's first join, retried for up to
// request_timeout while the coordinator fails or cannot be reached —
// watchHangUp reads the socket meanwhile: the end of the stream or an
// error ends the call's context at once (the join is cancelled, nothing
// joins for a client that is gone); bytes that arrive instead (a request
// the client pipelined) are kept for the frame reader (conn.early) and
// end the watch — the client is there.

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
