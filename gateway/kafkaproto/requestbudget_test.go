package kafkaproto

import (
	"maps"
	"net"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// eventually polls cond (every 2 ms) until it holds, failing t after
// timeout: e2e/sdk's Eventually, which this package cannot import.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	end := time.After(timeout)
	for !cond() {
		select {
		case <-tick.C:
		case <-end:
			t.Fatalf("not within %v: %s", timeout, what)
		}
	}
}

// readCounts wraps a listener's connections to count the bytes the
// server reads from each, by the client's address.
type readCounts struct {
	net.Listener
	counts sync.Map // client address → *atomic.Int64
}

func (l *readCounts) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	n := new(atomic.Int64)
	l.counts.Store(nc.RemoteAddr().String(), n)
	return countedConn{nc, n}, nil
}

// read is how many bytes the server has read from the client r.
func (l *readCounts) read(r *testConn) int64 {
	if n, ok := l.counts.Load(r.nc.LocalAddr().String()); ok {
		return n.(*atomic.Int64).Load()
	}
	return 0
}

type countedConn struct {
	net.Conn
	n *atomic.Int64
}

func (c countedConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// bigRequest is an ApiVersions request frame of about size bytes.
func bigRequest(size int) (kmsg.Request, []byte) {
	req := kmsg.NewPtrApiVersionsRequest()
	req.SetVersion(3) // the first with a client software name
	req.ClientSoftwareName = strings.Repeat("x", size)
	return req, kmsg.NewRequestFormatter().AppendRequest(nil, req, 1)
}

// TestRequestBytesHeldAreBounded is redteam7 #4, the attack as its test:
// one tenant's connections each send most of a large frame. Before, the
// listener read every one of them into a buffer of its own (128
// connections of one consume-only credential: 30 MB → 1.6 GB); now a
// frame reserves its size first and holds it until answered, within
// kafka_max_request_bytes_held_per_tenant (one frame here): the tenant's
// other frames wait unread, another tenant's frame is served meanwhile
// (room in kafka_max_request_bytes_held), and once the first is answered
// the waiting ones are read and answered in turn — nothing deadlocks.
func TestRequestBytesHeldAreBounded(t *testing.T) {
	table := leaseTable{}
	_, members, other := tenantTokens(t, 1, time.Hour, table) // members[0]: the tenant; other: another tenant's
	const frame = 600 << 10
	cfg := testConfig()
	cfg.MaxRequestBytes = 1 << 20
	cfg.MaxRequestBytesHeld, cfg.MaxRequestBytesHeldPerTenant = 2<<20, 1<<20
	counts := &readCounts{}
	cfg.WrapListener = func(ln net.Listener) net.Listener { counts.Listener = ln; return counts }
	s := startListener(t, cfg, table, nil)

	req, raw := bigRequest(frame)
	var conns []*testConn
	for range 3 {
		conns = append(conns, dialAuthenticated(t, s, members[0]))
	}
	before := make([]int64, len(conns))
	for i, r := range conns {
		before[i] = counts.read(r)
	}
	if _, err := conns[0].nc.Write(raw[:len(raw)-1]); err != nil { // all but its last byte: it holds its room
		t.Fatal(err)
	}
	eventually(t, 20*time.Second, "the first frame read", func() bool { return counts.read(conns[0])-before[0] == int64(len(raw)-1) })
	var writes sync.WaitGroup
	for _, r := range conns[1:] {
		writes.Add(1)
		go func() { defer writes.Done(); r.nc.Write(raw) }() // blocks while the listener does not read it
	}
	eventually(t, 20*time.Second, "the first frame read, the other two waiting unread", func() bool {
		for i, r := range conns[1:] {
			if n := counts.read(r) - before[i+1]; n > frameChunk+4 {
				t.Fatalf("the listener read %d bytes of a frame over the tenant's kafka_max_request_bytes_held_per_tenant (%d held: its first frame's)", n, s.RequestBytesHeld())
			}
		}
		first := counts.read(conns[0]) - before[0]
		return first == int64(len(raw)-1) && s.RequestBudgetWaits() == 2
	})
	if held := s.RequestBytesHeld(); held != int64(len(raw)-4) {
		t.Fatalf("request bytes held: %d, want the first frame's %d", held, len(raw)-4)
	}
	victim := dialAuthenticated(t, s, other) // another tenant: room in the total
	if _, err := victim.roundTrip(req); err != nil {
		t.Fatalf("another tenant's large request while the first tenant's share is taken: %v", err)
	}
	if _, err := conns[0].nc.Write(raw[len(raw)-1:]); err != nil {
		t.Fatal(err)
	}
	for i, r := range conns {
		r.corr = 1
		if _, err := r.receive(req); err != nil {
			t.Fatalf("frame %d: %v, want each answered in turn", i, err)
		}
	}
	writes.Wait()
	eventually(t, 20*time.Second, "nothing held once answered", func() bool {
		return s.RequestBytesHeld() == 0
	})
}

// TestRequestBudgetWaits: a frame without room waits until bytes are
// given back (then it is reserved: waiting never strands a frame the
// budget can hold), or until its deadline or its connection's end (then
// it is refused, naming the bound it did not fit): it never waits longer
// than a frame may take to arrive.
func TestRequestBudgetWaits(t *testing.T) {
	b := newRequestBudget(2<<20, 1<<20)
	never := make(chan struct{})
	far := time.Now().Add(time.Minute)
	if _, ok := b.take("a", 600<<10, far, never); !ok {
		t.Fatal("the first frame: refused with the budget empty")
	}
	start := time.Now()
	if over, ok := b.take("a", 600<<10, time.Now().Add(50*time.Millisecond), never); ok || over != limitRequestBytesPerTenant {
		t.Fatalf("a second frame of the tenant past its share: %v %v, want refused at its deadline, per tenant", over, ok)
	}
	if waited := time.Since(start); waited < 50*time.Millisecond {
		t.Fatalf("refused after %v, before its deadline", waited)
	}
	if _, ok := b.take("b", 1<<20, far, never); !ok { // another tenant: room in the total
		t.Fatal("another tenant's frame refused with room in the total")
	}
	done := make(chan struct{})
	close(done)
	if over, ok := b.take("c", 1<<20, far, done); ok || over != limitRequestBytes {
		t.Fatalf("a frame of a closed connection without room in the total: %v %v, want refused at once", over, ok)
	}
	reserved := make(chan bool)
	go func() { _, ok := b.take("a", 600<<10, far, never); reserved <- ok }()
	for b.waits.Load() < 3 { // the goroutine waits: the third wait
		runtime.Gosched()
	}
	b.give("a", 600<<10)
	if !<-reserved {
		t.Fatal("a waiting frame not reserved once its tenant's bytes were given back")
	}
	if held := b.held(); held != 600<<10+1<<20 {
		t.Fatalf("held %d, want %d", held, 600<<10+1<<20)
	}
}

// TestReauthenticationFrameReleasedToItsTenant (review12 #1): a
// re-authentication's SaslAuthenticate frame over 64 KiB is reserved
// under the connection's tenant and released after the new token moved
// the connection to another tenant (same subject, another tnt). Before,
// it was given back to the new tenant: the old one kept it for good and,
// its share spent by repeats, its next large frame was refused although
// it held nothing.
func TestReauthenticationFrameReleasedToItsTenant(t *testing.T) {
	table := leaseTable{}
	_, a, _ := tenantTokens(t, 1, time.Hour, table)
	_, b, _ := tenantTokens(t, 1, time.Hour, table)
	table[b[0]] = lease{claims: withSubject(table[b[0]].claims, table[a[0]].claims.Subject), ttl: time.Hour}
	cfg := testConfig()
	cfg.MaxRequestBytesHeld, cfg.MaxRequestBytesHeldPerTenant = 4<<20, 1<<20
	cfg.ReadTimeout = time.Second
	s := startListener(t, cfg, table, nil)
	r := dialAuthenticated(t, s, a[0])
	hs := kmsg.NewPtrSASLHandshakeRequest()
	hs.SetVersion(1)
	hs.Mechanism = "PLAIN"
	if _, err := r.roundTrip(hs); err != nil {
		t.Fatal(err)
	}
	auth := kmsg.NewPtrSASLAuthenticateRequest()
	auth.SetVersion(2)
	auth.SASLAuthBytes = []byte("\x00" + strings.Repeat("u", 100<<10) + "\x00" + b[0]) // a frame over 64 KiB
	if resp, err := r.roundTrip(auth); err != nil || resp.(*kmsg.SASLAuthenticateResponse).ErrorCode != 0 {
		t.Fatalf("re-authentication: %v %+v", err, resp)
	}
	if _, err := r.roundTrip(kmsg.NewPtrApiVersionsRequest()); err != nil { // the frame was answered: released
		t.Fatal(err)
	}
	s.requests.mu.Lock()
	held := maps.Clone(s.requests.byTenant)
	s.requests.mu.Unlock()
	if len(held) != 0 || s.RequestBytesHeld() != 0 {
		t.Fatalf("after the re-authentication was answered the budget holds %v (total %d), want nothing", held, s.RequestBytesHeld())
	}
	req, _ := bigRequest(950 << 10)
	if _, err := dialAuthenticated(t, s, a[0]).roundTrip(req); err != nil {
		t.Fatalf("the first tenant's 950 KiB frame, nothing of its own held: %v", err)
	}
}
