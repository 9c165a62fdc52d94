package sim

import (
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/capgate/capgate/internal/coordinators"
)

// base is virtual time zero: a whole second, as the coordinator mints
// expiries in whole seconds.
var base = time.Unix(1_700_000_000, 0).UTC()

// Options select what Run simulates beyond the seed.
type Options struct {
	// Duration is the faulty phase; zero means 10 simulated minutes.
	Duration time.Duration
	// Replicas is how many coordinator replicas run over one log (0 or 1:
	// one coordinator, restarted in place).
	Replicas int
	// Trace prints every event (to Trace's writer) as it runs.
	Trace func(line string)
	// bugs plants a known bug, for the tests that prove a checker fires.
	bugs bugs
	// tune adjusts the seed's profile (tests of planted bugs).
	tune func(*profile)
	// noUnfit: no unfit replica in any seed (unfit.go).
	noUnfit bool
}

// Stats are what one run exercised.
type Stats struct {
	Events         int
	Simulated      time.Duration
	Handoffs       int // grants of a partition that a previous holder had a capability for
	Refences       int // ... whose previous holder was the same member (a rejoin's fence and regrant)
	CleanHandoffs  int // ... whose previous holder released everything it delivered
	Admitted       int // fetches admitted by a gateway
	Cancelled      int // admitted fetches cancelled by a fence
	Records        int // records produced
	Delivered      int // records delivered to users, duplicates included
	Duplicates     int // records delivered more than once
	CoordCrashes   int
	GatewayCrashes int
	GaveUp         int // consumers whose shell stopped for good (a join refused)
	GatewayStuck   int // gateways that stopped applying sync answers for a while (polling on)
	RoguePolls     int // polls of a sync-token holder that acknowledges nothing
	SafeByLag      int // lagging episodes of gateway ids polling without acknowledging, counted safe (silent_gateways: fence)
	// A full gateway table (fill_test.go).
	ForgottenForLag int           // gateway ids forgotten for lagging to make room for a new one
	GatewayRefused  int           // sync polls of the world's gateways refused limit_exceeded (the table was full)
	NewIDs          int           // gateway restarts under a new id in the faulty phase
	NewIDsSynced    int           // ... that synced before the heal
	NewIDWaitMax    time.Duration // longest a restart under a new id waited for its first sync (faulty phase)
	SentinelStarts  int           // deliveries that began at an unresolved start offset
	TopicHits       int           // metadata reads that found a new topic and matched live patterns against it outside the loop
	Resyncs         int           // heartbeats saying resync (an earlier answer lost) that reached a coordinator
	// Member tokens with an exp (profile.memberTTL).
	Renewals            int // renewals in place (join with renew_token) that reached a coordinator and passed the shell's check
	ExpiredMemberTokens int // heartbeats, commits and leaves refused token_expired
	RenewalsInGrace     int // of Renewals, those whose member token had expired, taken within groups.renew_token_grace
	RenewalsExpired     int // renewals refused token_expired: past the leeway and the grace
	// Retried requests repeated (netFaults.dup, netFaults.stall).
	Stalled       int // joins, commits and leaves that landed after their sender gave up on them
	KeyedRepeats  int // keyed joins answered with the member an earlier attempt of the same key made (a rejoin)
	LateRepeats   int // ... that landed after their sender gave up (the retry answered first)
	LandedRepeats int // commits accepted as done for an epoch the partition had moved past (a repeat of one that landed)
	// Replicas only.
	Takeovers    int // promotions that succeeded
	Contested    int // ... while another replica still believed it led (a zombie, a lagging race)
	StepDowns    int // leaders that stepped down
	FencedWrites int // writes (Readys, beats) that failed fenced
	WriteFaults  int // transactions the log failed on purpose
	Pauses       int // replicas paused (zombies in the making)
	NotLeader    int // not_leader answers clients followed
	StaleResets  int // resets from a deposed leader below fences the new one published to other gateways
	// A slow log and the lease that follows its pace (replicaSettings.leaseMax).
	SlowBeats       int // beats whose transaction took a while (replicaSettings.slowBeat)
	StretchedLeases int // beats committed over twice a lease after the leader's last write, the leader leading on: a lease stretched by the log's pace
	// The unfit replica (unfit.go).
	UnfitMarked     int // times a misconfigured replica found itself unfit
	BrokenTakeovers int // takeovers of a broken replica that failed after their barrier
	ConsumerCrashes,
	Freezes,
	Partitions int
}

// Result is one run's outcome: Err is the first checker failure (nil
// when every checker held), TraceHash identifies the run's event trace.
type Result struct {
	Seed      uint64
	Replicas  int // Options.Replicas
	Stats     Stats
	TraceHash uint64
	Err       error
}

// World is one simulation: a single-threaded event loop over virtual
// time. Every part lives in it and every random choice comes from rng.
type World struct {
	seed    uint64
	rng     *rand.Rand
	prof    profile
	opts    Options
	now     time.Duration
	queue   eventHeap
	nextSeq uint64
	index   int // events run so far
	failure error
	healed  bool       // faults are off (heal-and-drain phase)
	unfit   unfitFault // the seed's unfit replica (replicas)
	live    *liveness  // "a fit replica leads" (replicas)
	stopped bool       // the drain is done
	trace   tracer
	stats   Stats

	net       *network
	kafka     *kafka
	tokens    *tokens
	coord     *coordinator               // the first replica (the only coordinator without replicas)
	coords    []*coordinator             // the replicas
	lists     map[int]*coordinators.List // sender node → its coordinator list (replicas)
	gateways  []*gateway
	consumers []*consumer
	check     *checker

	rogueAfter uint64 // the after of the rogue's polls (roguePoll)
	// rogueAfters are the afters of the rogue fleet's polls by id
	// (rogueFleetPoll, with rogueStale).
	rogueAfters map[string]uint64
}

// Run simulates one seed and checks every invariant after every event.
func Run(seed uint64, opts Options) Result {
	r, _ := runWorld(seed, opts)
	return r
}

// runWorld is Run, also returning the world (for tests that look inside).
func runWorld(seed uint64, opts Options) (Result, *World) {
	w := newWorld(seed, opts)
	w.start()
	w.loop(w.opts.Duration)
	if w.failure == nil {
		w.heal()
		w.drain()
	}
	w.stats.Simulated = w.now
	w.stats.Events = w.index
	return Result{Seed: seed, Replicas: opts.Replicas, Stats: w.stats, TraceHash: w.trace.sum(), Err: w.failure}, w
}

func newWorld(seed uint64, opts Options) *World {
	if opts.Duration == 0 {
		opts.Duration = 10 * time.Minute
	}
	w := &World{seed: seed, rng: rand.New(rand.NewPCG(seed, 0x5eed_ca95_a7e0)), opts: opts, queue: newEventHeap()}
	w.trace.init(opts.Trace)
	w.prof = drawProfile(w.rng)
	w.prof.memberTTL, w.prof.memberRenew = drawMemberTokens(seed)
	w.prof.net.stall, w.prof.net.stallMax = drawStalls(seed)
	w.prof.unownedRunMin = drawUnownedRunMin(seed)
	drawCreate(seed, &w.prof, opts.Duration)
	if opts.Replicas > 1 {
		w.prof.replicas = drawReplicas(seed, opts.Replicas)
	}
	if opts.tune != nil {
		opts.tune(&w.prof)
	}
	if opts.Replicas > 1 {
		w.setUnfitFault()
		w.live = newLiveness(w)
	}
	w.net = newNetwork(w)
	w.kafka = newKafka(w)
	w.tokens = newTokens()
	w.check = newChecker(w)
	for i := range w.prof.gateways {
		w.gateways = append(w.gateways, newGateway(w, i))
	}
	for i := range w.prof.consumers {
		w.consumers = append(w.consumers, newConsumer(w, i))
	}
	w.lists = map[int]*coordinators.List{}
	w.newReplicas(max(opts.Replicas, 1))
	return w
}

// start boots every part and arms the fault schedules.
func (w *World) start() {
	for _, c := range w.coords {
		if c.unfitMode() != unfitMisconfigured { // it boots late (unfit.go)
			c.boot()
		}
	}
	for _, g := range w.gateways {
		g.boot()
	}
	for i, c := range w.consumers {
		if i < w.prof.initialConsumers {
			c.boot()
		}
	}
	w.kafka.startProducer()
	w.armFaults()
}

// loop runs events until the queue is empty, a checker fails, or the
// clock passes until.
func (w *World) loop(until time.Duration) {
	for w.failure == nil && !w.stopped && w.queue.Len() > 0 && w.queue.Min().at <= until {
		ev := w.queue.Pop()
		w.now = ev.at
		w.index++
		w.trace.event(w, ev)
		ev.fn()
		if w.live != nil && w.failure == nil {
			w.live.step()
		}
	}
	if w.now < until && !w.stopped && w.failure == nil {
		w.now = until
	}
}

// at schedules fn at virtual time t (never in the past). Ties run in the
// order they were scheduled.
func (w *World) at(t time.Duration, kind eventKind, node int, fn func()) {
	if t < w.now {
		t = w.now
	}
	w.nextSeq++
	w.queue.Push(event{at: t, seq: w.nextSeq, kind: kind, node: int32(node), fn: fn})
}

// after schedules fn d from now.
func (w *World) after(d time.Duration, kind eventKind, node int, fn func()) {
	w.at(w.now+d, kind, node, fn)
}

// wall is the true time now.
func (w *World) wall() time.Time { return base.Add(w.now) }

// fail records the first checker failure; the loop stops after the event.
func (w *World) fail(checker, format string, args ...any) {
	if w.failure != nil {
		return
	}
	w.failure = &Failure{
		Seed: w.seed, Event: w.index, At: w.now, Checker: checker,
		Detail: fmt.Sprintf(format, args...),
	}
	w.trace.line(w, "FAIL "+w.failure.Error())
}

// Failure is a checker that fired: which one, where in the run, why.
type Failure struct {
	Seed    uint64
	Event   int
	At      time.Duration
	Checker string
	Detail  string
}

func (f *Failure) Error() string {
	return fmt.Sprintf("seed %d: event %d at %s: %s: %s", f.Seed, f.Event, f.At, f.Checker, f.Detail)
}

// chance draws true with probability p.
func (w *World) chance(p float64) bool { return p > 0 && w.rng.Float64() < p }

// between draws a duration uniformly in [lo, hi].
func (w *World) between(lo, hi time.Duration) time.Duration {
	if hi <= lo {
		return lo
	}
	return lo + time.Duration(w.rng.Int64N(int64(hi-lo)+1))
}

// exponential draws an exponentially distributed wait with the given mean.
func (w *World) exponential(mean time.Duration) time.Duration {
	return time.Duration(w.rng.ExpFloat64() * float64(mean))
}

// event is one scheduled step of the world.
type event struct {
	at   time.Duration
	seq  uint64
	kind eventKind
	node int32
	fn   func()
}

// eventHeap is the event queue: a min-heap on (at, seq), virtual time
// with ties broken by scheduling order — a total order (seq is unique),
// so the events come out the same whatever the heap's shape. Written
// for event rather than with internal/minheap's comparison function:
// every event goes in and out once, and the indirect call and the
// swaps were 8 % of the package's CPU.
type eventHeap struct{ items []event }

func newEventHeap() eventHeap { return eventHeap{items: make([]event, 0, 256)} }

func (e *event) before(o *event) bool { return e.at < o.at || (e.at == o.at && e.seq < o.seq) }

// Len is how many events wait.
func (h *eventHeap) Len() int { return len(h.items) }

// Min is the next event (Len > 0).
func (h *eventHeap) Min() *event { return &h.items[0] }

// Push adds ev: its place is found by moving parents down into the hole.
func (h *eventHeap) Push(ev event) {
	h.items = append(h.items, ev)
	s := h.items
	i := len(s) - 1
	for i > 0 {
		parent := (i - 1) / 2
		if !ev.before(&s[parent]) {
			break
		}
		s[i] = s[parent]
		i = parent
	}
	s[i] = ev
}

// Pop removes and returns the next event (Len > 0): the last moves into
// the root's hole, which sinks to its place.
func (h *eventHeap) Pop() event {
	s := h.items
	top := s[0]
	last := len(s) - 1
	x := s[last]
	s[last] = event{} // drop its closure for the collector
	s = s[:last]
	h.items = s
	if last == 0 {
		return top
	}
	i := 0
	for {
		child := 2*i + 1
		if child >= last {
			break
		}
		if r := child + 1; r < last && s[r].before(&s[child]) {
			child = r
		}
		if !s[child].before(&x) {
			break
		}
		s[i] = s[child]
		i = child
	}
	s[i] = x
	return top
}
