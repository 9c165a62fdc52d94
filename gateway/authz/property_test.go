package authz

import (
	"cmp"
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// model is the naive view: every entry ever applied in a list, queried by
// scanning. The optimised View must agree with it after every step.
type model struct {
	seq     uint64
	fences  []api.Fence
	denied  []api.Denied
	members []api.RevokedMember
	qos     []api.QoSOverride
	kids    []string
}

func (m *model) fence(g, tp string, p int32) uint64 {
	var e uint64
	for _, f := range m.fences {
		if f.Group == g && f.Topic == tp && f.Partition == p {
			e = max(e, f.Epoch)
		}
	}
	return e
}

func (m *model) apply(u api.SyncResponse, kids []string, now time.Time) {
	if u.Reset {
		*m = model{kids: m.kids}
	}
	m.seq = max(m.seq, u.Seq)
	if u.Reset {
		m.seq = u.Seq
	}
	m.fences = append(m.fences, u.Fences...)
	m.denied = append(m.denied, u.Denied...)
	m.members = append(m.members, u.RevokedMembers...)
	for _, q := range u.QoS {
		m.qos = slices.DeleteFunc(m.qos, func(o api.QoSOverride) bool { return o.ID == q.ID })
		m.qos = append(m.qos, q)
	}
	if len(kids) > 0 {
		m.kids = kids
	}
	m.prune(now)
}

func (m *model) prune(now time.Time) {
	n, l := now.Unix(), int64(leeway/time.Second)
	m.denied = slices.DeleteFunc(m.denied, func(d api.Denied) bool { return n >= d.Exp+l })
	m.members = slices.DeleteFunc(m.members, func(r api.RevokedMember) bool { return n >= r.Until+l })
	m.qos = slices.DeleteFunc(m.qos, func(q api.QoSOverride) bool { return n >= q.Until })
}

func (m *model) snapshot() Snapshot {
	s := Snapshot{Seq: m.seq}
	if len(m.kids) > 0 {
		s.Kids = slices.Clone(m.kids)
	}
	fences := map[FenceKey]uint64{}
	for _, f := range m.fences {
		k := FenceKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}
		if f.Epoch > 0 {
			fences[k] = max(fences[k], f.Epoch)
		}
	}
	for k, e := range fences {
		s.Fences = append(s.Fences, api.Fence{Group: k.Group, Topic: k.Topic, Partition: k.Partition, Epoch: e})
	}
	denied := map[string]int64{}
	for _, d := range m.denied {
		denied[d.JTI] = max(denied[d.JTI], d.Exp)
	}
	for j, e := range denied {
		s.Denied = append(s.Denied, api.Denied{JTI: j, Exp: e})
	}
	members := map[api.RevokedMember]int64{}
	for _, r := range m.members {
		k := api.RevokedMember{Group: r.Group, MemberID: r.MemberID}
		members[k] = max(members[k], r.Until)
	}
	for k, u := range members {
		s.RevokedMembers = append(s.RevokedMembers, api.RevokedMember{Group: k.Group, MemberID: k.MemberID, Until: u})
	}
	if len(m.qos) > 0 {
		s.QoS = slices.Clone(m.qos)
	}
	s.sort()
	return s
}

func (m *model) decide(c *ocap.Claims, req Request, now time.Time) Reason {
	if now.Unix() >= int64(c.ExpiresAt)+int64(leeway/time.Second) {
		return Expired
	}
	if c.Epoch != 0 && c.Epoch < m.fence(c.Group, c.Topic, *c.Partition) {
		return Fenced
	}
	// An entry holds while now < its time + leeway (the view's rule before
	// a reset teaches it the coordinator's), pruned or not.
	n, l := now.Unix(), int64(leeway/time.Second)
	for _, id := range append([]string{c.ID}, c.Chain...) {
		if slices.ContainsFunc(m.denied, func(d api.Denied) bool { return d.JTI == id && n < d.Exp+l }) {
			return Denied
		}
	}
	if c.Group != "" && slices.ContainsFunc(m.members, func(r api.RevokedMember) bool {
		return r.Group == c.Group && r.MemberID == c.Subject && n < r.Until+l
	}) {
		return RevokedMember
	}
	switch {
	case c.Topic != req.Topic:
		return WrongTopic
	case *c.Partition != req.Partition:
		return WrongPartition
	case !c.Ops.Has(req.Op):
		return WrongOp
	case req.Offset >= 0 && c.Offsets != nil && (req.Offset < c.Offsets.From || c.Offsets.To != 0 && req.Offset >= c.Offsets.To):
		return OffsetOutsideRange
	}
	return Allow
}

// qosOf ranks matching live overrides by (specificity, id), best first,
// and takes each field from the first that sets it.
func (m *model) qosOf(c *ocap.Claims, now time.Time) ocap.QoS {
	q := ocap.QoS{}
	if c.QoS != nil {
		q = *c.QoS
	}
	type ranked struct {
		score int
		o     api.QoSOverride
	}
	var live []ranked
	for _, o := range m.qos {
		if s := specificity(o.Selector, c); s > 0 && now.Unix() < o.Until {
			live = append(live, ranked{s, o})
		}
	}
	slices.SortFunc(live, func(a, b ranked) int { return cmp.Or(cmp.Compare(b.score, a.score), cmp.Compare(b.o.ID, a.o.ID)) })
	pick := func(set func(api.QoSOverride) bool, use func(api.QoSOverride)) {
		for _, r := range live {
			if set(r.o) {
				use(r.o)
				return
			}
		}
	}
	pick(func(o api.QoSOverride) bool { return o.LogLevel != "" }, func(o api.QoSOverride) { q.LogLevel = o.LogLevel })
	pick(func(o api.QoSOverride) bool { return o.Monitor != "" }, func(o api.QoSOverride) { q.Monitor = o.Monitor })
	pick(func(o api.QoSOverride) bool { return o.MaxBytesPerSec != 0 }, func(o api.QoSOverride) { q.MaxBytesPerSec = o.MaxBytesPerSec })
	return q
}

// gen draws small domains so that collisions (same key, same jti) are common.
type gen struct {
	r    *rand.Rand
	now  time.Time
	jwks []api.JWK
}

func (g *gen) pick(xs ...string) string { return xs[g.r.IntN(len(xs))] }
func (g *gen) group() string            { return g.pick("g1", "g2") }
func (g *gen) topic() string            { return g.pick("t1", "t2") }
func (g *gen) partition() int32         { return int32(g.r.IntN(3)) }
func (g *gen) id() string               { return jti(1 + g.r.IntN(6)) }
func (g *gen) at() int64                { return g.now.Unix() + int64(g.r.IntN(12)) - 3 }

func (g *gen) update(seq uint64) (api.SyncResponse, []string) {
	u := api.SyncResponse{Seq: seq, Reset: g.r.IntN(8) == 0}
	for range g.r.IntN(4) {
		u.Fences = append(u.Fences, api.Fence{Group: g.group(), Topic: g.topic(), Partition: g.partition(), Epoch: uint64(g.r.IntN(7))})
	}
	for range g.r.IntN(3) {
		u.Denied = append(u.Denied, api.Denied{JTI: g.id(), Exp: g.at()})
	}
	for range g.r.IntN(2) {
		u.RevokedMembers = append(u.RevokedMembers, api.RevokedMember{Group: g.group(), MemberID: g.pick("m1", "m2", "m3"), Until: g.at()})
	}
	for range g.r.IntN(2) {
		u.QoS = append(u.QoS, g.override())
	}
	var kids []string
	for _, k := range g.jwks {
		if g.r.IntN(3) == 0 {
			u.Keys = append(u.Keys, k)
			kids = append(kids, k.Kid)
		}
	}
	slices.Sort(kids)
	return u, kids
}

func (g *gen) override() api.QoSOverride {
	s := api.QoSSelector{}
	if g.r.IntN(2) == 0 {
		s.Group = g.group()
	}
	if g.r.IntN(2) == 0 {
		s.Topic = g.topic()
	}
	if g.r.IntN(3) == 0 {
		s.Partition = part(g.partition())
	}
	if g.r.IntN(3) == 0 {
		s.Holder = g.pick("m1", "m2", "m3")
	}
	if g.r.IntN(4) == 0 {
		s.JTI = g.id()
	}
	o := api.QoSOverride{ID: g.pick("a", "b", "c", "d"), Selector: s, Until: g.at()}
	switch g.r.IntN(3) {
	case 0:
		o.LogLevel = g.pick("debug", "warn")
	case 1:
		o.Monitor = g.pick("x", "y")
	default:
		o.MaxBytesPerSec = int64(1 + g.r.IntN(3))
	}
	return o
}

func (g *gen) claims() *ocap.Claims {
	c := &ocap.Claims{
		Subject: g.pick("m1", "m2", "m3"), ID: g.id(), ExpiresAt: ocap.Seconds(g.at()),
		Group: g.group(), Topic: g.topic(), Partition: part(g.partition()), Epoch: uint64(g.r.IntN(7)),
		Ops: ocap.Ops(1 + g.r.IntN(7)),
	}
	if g.r.IntN(4) == 0 {
		c.Group, c.Epoch = "", 0
	}
	if g.r.IntN(3) == 0 {
		c.Chain = []string{g.id()}
	}
	if g.r.IntN(3) == 0 {
		c.Offsets = &ocap.OffsetRange{From: int64(g.r.IntN(5)), To: int64(g.r.IntN(10))}
	}
	if g.r.IntN(3) == 0 {
		c.QoS = &ocap.QoS{Monitor: "own", MaxBytesPerSec: 9}
	}
	return c
}

func (g *gen) request() Request {
	op := []ocap.Op{ocap.OpFetch, ocap.OpProduce, ocap.OpCommit}[g.r.IntN(3)]
	return Request{Topic: g.topic(), Partition: g.partition(), Op: op, Offset: int64(g.r.IntN(12)) - 1}
}

func TestViewMatchesNaiveModel(t *testing.T) {
	for seed := range uint64(40) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { checkAgainstModel(t, seed, 150) })
	}
}

func checkAgainstModel(t *testing.T, seed uint64, steps int) {
	g := &gen{r: rand.New(rand.NewPCG(seed, 7)), now: t0, jwks: []api.JWK{testJWK(t, 1), testJWK(t, 2), testJWK(t, 3)}}
	v, m := newView(), &model{}
	for step := range steps {
		g.now = g.now.Add(time.Duration(g.r.IntN(3)) * time.Second)
		switch op := g.r.IntN(10); {
		case op < 6:
			u, kids := g.update(uint64(step + 1))
			before := maps.Clone(fenceMap(m))
			ch := mustApply(t, v, u, g.now)
			m.apply(u, kids, g.now)
			if want := raised(before, fenceMap(m)); !reflect.DeepEqual(ch.Raised, want) {
				t.Fatalf("seed %d step %d: raised %v, model %v", seed, step, ch.Raised, want)
			}
		case op < 8:
			gr, tp, p, e := g.group(), g.topic(), g.partition(), uint64(g.r.IntN(8))
			moved := v.Raise(gr, tp, p, e)
			if want := e > m.fence(gr, tp, p); moved != want {
				t.Fatalf("seed %d step %d: Raise moved=%v, model %v", seed, step, moved, want)
			}
			m.fences = append(m.fences, api.Fence{Group: gr, Topic: tp, Partition: p, Epoch: e})
		default:
			v.Prune(g.now)
			m.prune(g.now)
		}
		if got, want := v.Snapshot(), m.snapshot(); !reflect.DeepEqual(got, want) {
			t.Fatalf("seed %d step %d: view\n%+v\nmodel\n%+v", seed, step, got, want)
		}
		for range 10 {
			c, req := g.claims(), g.request()
			if got, want := Decide(c, req, v, g.now), m.decide(c, req, g.now); got != want {
				t.Fatalf("seed %d step %d: Decide(%+v, %+v) = %v, model %v", seed, step, c, req, got, want)
			}
			if got, want := v.QoS(c, g.now), m.qosOf(c, g.now); got != want {
				t.Fatalf("seed %d step %d: QoS = %+v, model %+v", seed, step, got, want)
			}
		}
	}
}

func fenceMap(m *model) map[FenceKey]uint64 {
	out := map[FenceKey]uint64{}
	for _, f := range m.snapshot().Fences {
		out[FenceKey{Group: f.Group, Topic: f.Topic, Partition: f.Partition}] = f.Epoch
	}
	return out
}

func raised(before, after map[FenceKey]uint64) []api.Fence {
	var out []api.Fence
	for k, e := range after {
		if e > before[k] {
			out = append(out, api.Fence{Group: k.Group, Topic: k.Topic, Partition: k.Partition, Epoch: e})
		}
	}
	slices.SortFunc(out, compareFences)
	return out
}
