package kafkaclients

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/sdk"
)

// TestAdminRevokeStopsKgoPartition: an admin revoke of a partition a kgo
// KIP-848 consumer is long-polling answers once every gateway applied the
// fence — by then the gateway has cancelled the consumer's in-flight
// Fetch — and no record of the partition written after the answer
// reaches the consumer until capgate grants the partition again (a new
// epoch, announced to kgo as a new assignment). Within one round trip:
// on the wire, the consumer's next Fetch answer for the partition is that
// long poll's, with the per-partition error and no record, before the
// regrant.
func TestAdminRevokeStopsKgoPartition(t *testing.T) {
	s := Start(t, Options{Partitions: 4})
	cred := s.ClientCredential(t, "rv")
	tap := &fetchTap{partition: 2}
	m := joinGroup(t, s, "solo", "rv", cred, kip848, kgo.FetchMaxWait(5*time.Second), kgo.Dialer(tap.dial))
	sdk.Eventually(t, 20*time.Second, "the member consuming all 4", func() (bool, string) {
		ok, why := settled(t, s, "rv", 1)
		return ok && len(m.Assigned()) == 4, why
	})
	produceDirect(t, s, "orders", 2, 3)
	sdk.Eventually(t, 10*time.Second, "the first records polled", func() (bool, string) {
		return len(m.Records()) == 3, fmt.Sprint(len(m.Records()))
	})
	before := grepCount(metrics(t, s), "capgate_gateway_fetches_cancelled_total")

	// The member is now long-polling (5 s) every partition; revoke one.
	var out coordinator.RevokeResponse
	revoking := time.Now()
	if status, raw := s.Admin(t, http.MethodPost, "/v1/admin/groups/rv/partitions/orders/2/revoke", coordinator.RevokeRequest{Reason: "test"}, &out); status != http.StatusOK {
		t.Fatalf("revoke: %d %s", status, raw)
	}
	answered := time.Now()
	if after := grepCount(metrics(t, s), "capgate_gateway_fetches_cancelled_total"); after <= before {
		t.Fatalf("the in-flight Fetch was not cancelled before the revoke answered (cancelled %v → %v)", before, after)
	}
	_, hw, err := s.Broker.Offsets(context.Background(), s.Topic, 2)
	if err != nil {
		t.Fatal(err)
	}
	produceDirect(t, s, "orders", 2, 3)
	sdk.Eventually(t, 20*time.Second, "partition 2 granted again and its new records polled", func() (bool, string) {
		recs, _, granted := m.polledSince(2, answered)
		return len(recs) >= 3 && granted.After(answered), fmt.Sprintf("%d records, granted %v", len(recs), granted)
	})
	recs, at, granted := m.polledSince(2, answered)
	for i, r := range recs {
		if r.Offset >= hw && at[i].Before(granted) {
			t.Errorf("orders/2@%d polled at %s, before the partition was granted again at %s (revoke answered at %s)",
				r.Offset, at[i].Format(time.StampMicro), granted.Format(time.StampMicro), answered.Format(time.StampMicro))
		}
	}
	t.Logf("revoke to epoch %d answered; regranted %s later", out.Epoch, granted.Sub(answered).Round(time.Millisecond))
	// On the wire (tap): the first Fetch answer for partition 2 the
	// client reads after the revoke was sent answers the long poll that
	// was in flight across it (its request was written before the revoke
	// answered), with the per-partition NOT_LEADER_OR_FOLLOWER and no
	// record, before the partition is granted again: the consumer learns
	// of the revoke in that one round trip, not when its 5 s poll ends.
	// No answer read from the revoke until the regrant carries a record
	// of partition 2.
	fetches, errs := tap.Fetches()
	for _, err := range errs {
		t.Error(err)
	}
	var first *tappedFetch
	for i, f := range fetches {
		if !f.answered || f.read.Before(revoking) {
			continue
		}
		if first == nil || f.read.Before(first.read) {
			first = &fetches[i]
		}
		if f.read.Before(granted) && f.records > 0 {
			t.Errorf("a Fetch answer read %s after the revoke was sent, before orders/2 was granted again, carried %d bytes of its records",
				f.read.Sub(revoking), f.records)
		}
	}
	switch {
	case first == nil:
		t.Errorf("no Fetch answer for orders/2 was read after the revoke (%d Fetches named it)", len(fetches))
	case first.errorCode != kerr.NotLeaderForPartition.Code || first.records > 0:
		t.Errorf("the first Fetch answer for orders/2 after the revoke: error %d with %d bytes of records, want %d (NOT_LEADER_OR_FOLLOWER) and none",
			first.errorCode, first.records, kerr.NotLeaderForPartition.Code)
	case !first.sent.Before(answered):
		t.Errorf("the first Fetch answer for orders/2 after the revoke was to a request written %s after the revoke answered: the long poll in flight across it was not answered",
			first.sent.Sub(answered))
	case !first.read.Before(granted):
		t.Errorf("the revoke reached the consumer's Fetch only %s after the partition was granted again", first.read.Sub(granted))
	default:
		t.Logf("the long poll in flight (written %s before the revoke was sent) was answered with error %d %s after it, the revoke %s after it",
			revoking.Sub(first.sent), first.errorCode, first.read.Sub(revoking), answered.Sub(revoking))
	}
}

// fetchTap watches, on every connection of a kgo client (its Dialer),
// the Fetches naming one partition: when each request was written
// (noted before its first byte leaves) and, when its response has been
// read, the partition's error code and record bytes in it. Requests and
// responses are decoded with kmsg; a frame it cannot decode is an error
// of the test.
type fetchTap struct {
	partition int32

	mu      sync.Mutex
	fetches []*tappedFetch
	errs    []error
}

type tappedFetch struct {
	sent, read time.Time // read is zero until the response was read
	answered   bool      // the response named the partition
	errorCode  int16
	records    int // bytes of record batches for the partition
}

func (ft *fetchTap) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	nc, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &tapConn{Conn: nc, tap: ft, pending: map[int32]pendingFetch{}}, nil
}

// Fetches returns a copy of what was seen so far.
func (ft *fetchTap) Fetches() ([]tappedFetch, []error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	out := make([]tappedFetch, len(ft.fetches))
	for i, f := range ft.fetches {
		out[i] = *f
	}
	return out, append([]error(nil), ft.errs...)
}

// tapConn is one tapped connection. kgo writes a connection's requests
// from one goroutine at a time and reads its responses from another.
type tapConn struct {
	net.Conn
	tap        *fetchTap
	wbuf, rbuf []byte
	pmu        sync.Mutex
	pending    map[int32]pendingFetch // Fetches naming the partition, by correlation id
}

type pendingFetch struct {
	f       *tappedFetch
	version int16
}

// frames cuts the complete size-prefixed frames off the front of *buf.
func frames(buf *[]byte) [][]byte {
	var out [][]byte
	for len(*buf) >= 4 {
		n := int(binary.BigEndian.Uint32(*buf))
		if len(*buf) < 4+n {
			break
		}
		out = append(out, (*buf)[4:4+n])
		*buf = (*buf)[4+n:]
	}
	return out
}

func (c *tapConn) Write(p []byte) (int, error) {
	now := time.Now()
	c.wbuf = append(c.wbuf, p...)
	for _, frame := range frames(&c.wbuf) {
		b := kbin.Reader{Src: frame}
		key, version, corr := b.Int16(), b.Int16(), b.Int32()
		if key != int16(kmsg.Fetch) {
			continue
		}
		req := kmsg.NewPtrFetchRequest()
		req.Version = version
		b.NullableString() // client id
		if req.IsFlexible() {
			kmsg.SkipTags(&b)
		}
		if err := req.ReadFrom(b.Src); err != nil {
			c.tap.fail(fmt.Errorf("fetch request v%d: %w", version, err))
			continue
		}
		for _, t := range req.Topics {
			for _, part := range t.Partitions {
				if part.Partition == c.tap.partition {
					f := &tappedFetch{sent: now}
					c.pmu.Lock()
					c.pending[corr] = pendingFetch{f, version}
					c.pmu.Unlock()
					c.tap.mu.Lock()
					c.tap.fetches = append(c.tap.fetches, f)
					c.tap.mu.Unlock()
				}
			}
		}
	}
	return c.Conn.Write(p)
}

func (c *tapConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	now := time.Now()
	c.rbuf = append(c.rbuf, p[:n]...)
	for _, frame := range frames(&c.rbuf) {
		b := kbin.Reader{Src: frame}
		corr := b.Int32()
		c.pmu.Lock()
		pf, ok := c.pending[corr]
		delete(c.pending, corr)
		c.pmu.Unlock()
		if !ok {
			continue
		}
		f, resp := pf.f, kmsg.NewPtrFetchResponse()
		resp.Version = pf.version
		if resp.IsFlexible() {
			kmsg.SkipTags(&b)
		}
		if err := resp.ReadFrom(b.Src); err != nil {
			c.tap.fail(fmt.Errorf("fetch response v%d: %w", pf.version, err))
			continue
		}
		c.tap.mu.Lock()
		f.read = now
		for _, t := range resp.Topics {
			for _, part := range t.Partitions {
				if part.Partition == c.tap.partition {
					f.answered, f.errorCode, f.records = true, part.ErrorCode, len(part.RecordBatches)
				}
			}
		}
		c.tap.mu.Unlock()
	}
	return n, err
}

func (ft *fetchTap) fail(err error) {
	ft.mu.Lock()
	defer ft.mu.Unlock()
	ft.errs = append(ft.errs, err)
}
