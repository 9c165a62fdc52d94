package group_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/coordinator/group"
)

var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

type pkey struct {
	group string
	assign.Partition
}

func key(g, topic string, p int32) pkey {
	return pkey{g, assign.Partition{Topic: topic, Partition: p}}
}

// client is a simulated consumer as the world sees it: what it was told.
type client struct {
	group, id, instance string
	held                map[assign.Partition]group.Grant // capabilities it may use
	revoked             []api.PartitionRef               // told to stop, not yet released
	parked              group.Ref                        // held heartbeat, 0 = none
	news                []group.News                     // every heartbeat reply
	grants              []group.Grant                    // every grant and renewal received
}

// gatewaySim is a simulated gateway: the fences it applied.
type gatewaySim struct {
	id     string
	seq    uint64
	fences map[pkey]uint64
	parked group.Ref
	sentAt time.Time // when the held poll was sent
	lastOK time.Time // send time of the last poll answered
	resets int
}

// world drives a machine like the shell would, checking invariants and
// the one-reply-per-request rule after every step.
type world struct {
	t        testing.TB
	cfg      group.Config
	m        *group.Machine
	now      time.Time
	ref      group.Ref
	store    *memStore
	replies  map[group.Ref]group.Message
	clients  map[string]*client
	gateways map[string]*gatewaySim
	stuck    map[string]bool // gateways that stopped polling
	sent     []group.Message
	tokens   map[pkey][]group.Grant // capabilities held, for checkSafety
	what     map[group.Ref]string   // what a request was, for transcripts
	drop     func(group.Message) bool
}

func newWorld(t testing.TB, mutate ...func(*group.Config)) *world {
	t.Helper()
	cfg := group.DefaultConfig()
	// The tests model assignments, not the join window (window.go): a
	// first join is assigned at once unless a test turns the window on.
	cfg.InitialAssignDelay = 0
	for _, f := range mutate {
		f(&cfg)
	}
	m, err := group.New(cfg, rand.New(rand.NewPCG(1, 2)))
	if err != nil {
		t.Fatal(err)
	}
	w := &world{
		t: t, cfg: cfg, m: m, now: t0, store: newMemStore(),
		replies:  make(map[group.Ref]group.Message),
		clients:  make(map[string]*client),
		gateways: make(map[string]*gatewaySim),
		stuck:    make(map[string]bool),
		tokens:   make(map[pkey][]group.Grant),
		what:     make(map[group.Ref]string),
	}
	w.drain()
	return w
}

func (w *world) nextRef() group.Ref {
	w.ref++
	return w.ref
}

// step applies ev at the current time and returns the messages sent.
func (w *world) step(ev group.Event) []group.Message {
	w.t.Helper()
	w.m.Step(w.now, ev)
	return w.drain()
}

// advance moves time forward by d and ticks.
func (w *world) advance(d time.Duration) []group.Message {
	w.t.Helper()
	w.now = w.now.Add(d)
	w.m.Tick(w.now)
	return w.drain()
}

// advanceTo ticks at every deadline up to `to`, then at `to`.
func (w *world) advanceTo(to time.Time) {
	w.t.Helper()
	for {
		at, ok := w.m.NextDeadline()
		if !ok || at.After(to) {
			break
		}
		if at.After(w.now) {
			w.now = at
		}
		w.m.Tick(w.now)
		w.drain()
	}
	if to.After(w.now) {
		w.now = to
	}
	w.m.Tick(w.now)
	w.drain()
}

func (w *world) drain() []group.Message {
	w.t.Helper()
	var msgs []group.Message
	if w.m.HasReady() {
		rd, err := w.m.Ready()
		if err != nil {
			w.t.Fatalf("at %s: %v", w.now.Sub(t0), err)
		}
		w.store.apply(w.t, rd.Persist)
		for _, msg := range rd.Messages {
			if _, dup := w.replies[msg.Request()]; dup {
				w.t.Fatalf("ref %d answered twice: %#v", msg.Request(), msg)
			}
			w.replies[msg.Request()] = msg
			w.deliver(msg)
		}
		msgs = rd.Messages
		w.sent = append(w.sent, msgs...)
		w.m.Advance()
	}
	if err := w.m.CheckInvariants(); err != nil {
		w.t.Fatalf("at %s: %v", w.now.Sub(t0), err)
	}
	w.checkSafety()
	return msgs
}

// deliver applies a message to the simulated clients and gateways. A
// reply to a request the client or gateway gave up on, or one the network
// drops, is lost: its capabilities are never used.
func (w *world) deliver(msg group.Message) {
	if w.drop != nil && w.drop(msg) {
		w.forget(msg.Request())
		return
	}
	switch msg := msg.(type) {
	case group.JoinReply:
		c := w.clients[msg.MemberID]
		if c == nil {
			c = &client{group: msg.Group, id: msg.MemberID, held: make(map[assign.Partition]group.Grant)}
			w.clients[msg.MemberID] = c
		}
		w.receive(c, msg.Grants)
	case group.News:
		c := w.clients[msg.MemberID]
		if c == nil || c.parked != msg.Ref {
			return
		}
		c.parked = 0
		c.news = append(c.news, msg)
		c.revoked = append(c.revoked, msg.Revoke...)
		w.receive(c, slices.Concat(msg.Grants, msg.Renew))
	case group.LeaseReply:
		w.token(msg.Grant)
	case group.Rejected:
		w.forget(msg.Ref)
	case group.SyncReply:
		gw := w.gateways[msg.Gateway]
		if gw == nil || gw.parked != msg.Ref {
			return
		}
		gw.parked = 0
		gw.lastOK = gw.sentAt
		if msg.Reset {
			gw.fences = make(map[pkey]uint64)
			gw.resets++
		}
		for _, f := range msg.Fences {
			k := key(f.Group, f.Topic, f.Partition)
			gw.fences[k] = max(gw.fences[k], f.Epoch)
		}
		gw.seq = msg.Seq
	}
}

// forget drops whatever waits for ref.
func (w *world) forget(ref group.Ref) {
	for _, c := range w.clients {
		if c.parked == ref {
			c.parked = 0
		}
	}
	for _, gw := range w.gateways {
		if gw.parked == ref {
			gw.parked = 0
		}
	}
}

func (w *world) receive(c *client, grants []group.Grant) {
	for _, g := range grants {
		c.held[assign.Partition{Topic: g.Topic, Partition: g.Partition}] = g
		c.grants = append(c.grants, g)
		w.token(g)
	}
}

// token records a minted capability for the safety check.
func (w *world) token(g group.Grant) {
	k := key(g.Group, g.Topic, g.Partition)
	w.tokens[k] = append(w.tokens[k], g)
}

// checkSafety is the property the protocol exists for: at no instant can
// two different holders use a capability for the same partition at any
// gateway in sync. A gateway serves a token while it synced successfully
// within sync_timeout, the epoch is not below its fence, and exp+leeway
// has not passed. (Real gateways also raise fences on newer epochs they
// see; ignoring that only makes this check stricter.)
func (w *world) checkSafety() {
	w.t.Helper()
	syncTimeout := w.cfg.GatewayTimeout - w.cfg.MaxClockSkew - time.Millisecond
	for k, tokens := range w.tokens {
		live := tokens[:0]
		users := map[string]uint64{}
		for _, tok := range tokens {
			if w.now.After(tok.ExpiresAt.Add(w.cfg.Leeway)) {
				continue
			}
			live = append(live, tok)
			for _, gw := range w.gateways {
				if w.now.Sub(gw.lastOK) < syncTimeout && tok.Epoch >= gw.fences[k] {
					users[tok.Holder] = tok.Epoch
				}
			}
		}
		w.tokens[k] = live
		if len(users) > 1 {
			w.t.Fatalf("at %s two holders can read %v: %v", w.now.Sub(t0), k, users)
		}
	}
}

func (w *world) topics(counts map[string]int32) {
	w.t.Helper()
	w.step(group.Topics{Partitions: counts})
}

// join adds a member and returns its id; it fails the test on rejection.
func (w *world) join(g, instance string, topics ...string) string {
	w.t.Helper()
	ref := w.nextRef()
	w.step(group.Join{Ref: ref, Group: g, InstanceID: instance, ClientID: "c", Topics: topics})
	r, ok := w.replies[ref].(group.JoinReply)
	if !ok {
		w.t.Fatalf("join %s/%s: %#v", g, instance, w.replies[ref])
	}
	w.clients[r.MemberID].instance = instance
	return r.MemberID
}

// heartbeat sends a heartbeat for the member unless one is held.
func (w *world) heartbeat(id string) {
	w.t.Helper()
	w.sendHeartbeat(id, false)
}

// sendHeartbeat sends a heartbeat (saying resync if asked) unless one is
// held, and returns its Ref (0: one was held).
func (w *world) sendHeartbeat(id string, resync bool) group.Ref {
	w.t.Helper()
	c := w.clients[id]
	if c.parked != 0 {
		return 0
	}
	ref := w.nextRef()
	c.parked = ref
	w.what[ref] = "heartbeat " + c.instance
	w.step(group.Heartbeat{Ref: ref, Group: c.group, MemberID: id, Resync: resync})
	return ref
}

// poll sends a sync poll for the gateway unless one is held.
func (w *world) poll(id string) {
	w.t.Helper()
	gw := w.gateways[id]
	if gw == nil {
		gw = &gatewaySim{id: id, fences: make(map[pkey]uint64)}
		w.gateways[id] = gw
	}
	if gw.parked != 0 {
		return
	}
	gw.parked, gw.sentAt = w.nextRef(), w.now
	w.what[gw.parked] = "poll " + id
	w.step(group.SyncPoll{Ref: gw.parked, Gateway: id, After: gw.seq})
}

// pollUntilParked polls until the gateway is held, i.e. it acked
// everything.
func (w *world) pollUntilParked(id string) {
	w.t.Helper()
	for range 10 {
		w.poll(id)
		if w.gateways[id].parked != 0 {
			return
		}
	}
	w.t.Fatalf("gateway %s never caught up", id)
}

// commit commits offset for a partition the client holds (or is releasing)
// and returns the reply.
func (w *world) commit(id, topic string, partition int32, epoch uint64, offset int64, release bool) group.Message {
	w.t.Helper()
	ref := w.nextRef()
	w.step(group.Commit{Ref: ref, Group: w.clients[id].group, MemberID: id, Release: release,
		Offsets: []group.CommitOffset{{Topic: topic, Partition: partition, Epoch: epoch, Offset: offset}}})
	return w.replies[ref]
}

// release commits offset for every partition the client was told to stop
// reading and releases them.
func (w *world) release(id string, offset int64) {
	w.t.Helper()
	c := w.clients[id]
	revoked := c.revoked
	c.revoked = nil
	for _, r := range revoked {
		delete(c.held, assign.Partition{Topic: r.Topic, Partition: r.Partition})
		msg := w.commit(id, r.Topic, r.Partition, r.Epoch, offset, true)
		if _, ok := msg.(group.CommitReply); !ok {
			if rej, ok := msg.(group.Rejected); !ok || rej.Code != api.CodeStaleEpoch {
				w.t.Fatalf("release %s %v: %#v", id, r, msg)
			}
		}
	}
}

// settle runs cooperative clients and gateways until no handoff is left:
// gateways poll, clients release what was revoked and heartbeat.
func (w *world) settle(groupName string) {
	w.t.Helper()
	for range 50 {
		for _, id := range sortedMapKeys(w.gateways) {
			w.pollUntilParked(id)
		}
		busy := false
		for _, id := range sortedMapKeys(w.clients) {
			c := w.clients[id]
			if c.group != groupName || !w.isMember(c.group, id) {
				continue
			}
			if len(c.revoked) > 0 {
				busy = true
				w.release(id, -1) // release without committing
			}
			w.heartbeat(id)
		}
		if !busy && !w.revoking(groupName) {
			return
		}
	}
	w.t.Fatalf("group %s did not settle: %+v", groupName, w.describe(groupName).Partitions)
}

func (w *world) isMember(g, id string) bool {
	for _, mem := range w.describe(g).Members {
		if mem.ID == id {
			return true
		}
	}
	return false
}

func (w *world) revoking(g string) bool {
	for _, p := range w.describe(g).Partitions {
		if p.State == group.Revoking {
			return true
		}
	}
	return false
}

func (w *world) describe(g string) group.GroupDescription {
	d, _ := w.m.DescribeGroup(g)
	return d
}

func (w *world) partition(g, topic string, number int32) group.PartitionDescription {
	w.t.Helper()
	for _, p := range w.describe(g).Partitions {
		if p.Topic == topic && p.Partition == number {
			return p
		}
	}
	w.t.Fatalf("no partition %s/%s/%d", g, topic, number)
	return group.PartitionDescription{}
}

// owners maps each partition of topic to its owner (or "" when not owned).
func (w *world) owners(g string) map[assign.Partition]string {
	out := make(map[assign.Partition]string)
	for _, p := range w.describe(g).Partitions {
		if p.State == group.Owned {
			out[assign.Partition{Topic: p.Topic, Partition: p.Partition}] = p.Owner
		}
	}
	return out
}

func (w *world) epochs(g string) map[assign.Partition]uint64 {
	out := make(map[assign.Partition]uint64)
	for _, p := range w.describe(g).Partitions {
		out[assign.Partition{Topic: p.Topic, Partition: p.Partition}] = p.Epoch
	}
	return out
}

func sortedMapKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

func grantsFor(msgs []group.Message, holder string) []group.Grant {
	var out []group.Grant
	for _, msg := range msgs {
		switch msg := msg.(type) {
		case group.News:
			if msg.MemberID == holder {
				out = append(out, msg.Grants...)
			}
		case group.JoinReply:
			if msg.MemberID == holder {
				out = append(out, msg.Grants...)
			}
		case group.LeaseReply:
			if msg.Grant.Holder == holder {
				out = append(out, msg.Grant)
			}
		}
	}
	return out
}

func revokesFor(msgs []group.Message, member string) []api.PartitionRef {
	var out []api.PartitionRef
	for _, msg := range msgs {
		if n, ok := msg.(group.News); ok && n.MemberID == member {
			out = append(out, n.Revoke...)
		}
	}
	return out
}

func fencesIn(msgs []group.Message) []api.Fence {
	var out []api.Fence
	for _, msg := range msgs {
		if r, ok := msg.(group.SyncReply); ok && !r.Reset {
			out = append(out, r.Fences...)
		}
	}
	return out
}

func mustReply[T group.Message](t testing.TB, w *world, ref group.Ref) T {
	t.Helper()
	msg, ok := w.replies[ref].(T)
	if !ok {
		var zero T
		t.Fatalf("reply to %d: got %#v, want %T", ref, w.replies[ref], zero)
	}
	return msg
}

func mustReject(t testing.TB, w *world, ref group.Ref, code api.Code) {
	t.Helper()
	r, ok := w.replies[ref].(group.Rejected)
	if !ok || r.Code != code {
		t.Fatalf("reply to %d: got %#v, want rejection %s", ref, w.replies[ref], code)
	}
}

func (p pkey) String() string {
	return fmt.Sprintf("%s/%s/%d", p.group, p.Topic, p.Partition.Partition)
}
