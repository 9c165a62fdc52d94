package sim

import (
	"math/rand/v2"
	"time"

	"github.com/capgate/capgate/coordinator/group"
)

// profile is what a seed draws before anything runs: the cluster's shape,
// its settings, and the rate of every fault. Some seeds are calm, some
// are harsh; every one keeps the timeouts DESIGN §4 requires
// (sync_timeout < gateway_timeout − max_clock_skew).
type profile struct {
	gateways         int
	consumers        int // slots; at most this many run at once
	initialConsumers int
	topics           []string
	partitions       []int32       // per topic
	static           float64       // share of consumers with an instance id
	pattern          float64       // share of consumers subscribing by topic pattern
	growAt           time.Duration // when a topic grows (0: never)
	growTopic        int
	growBy           int
	adminEvery       time.Duration // mean time between admin requests (0: none)
	denyJTI          bool          // admins deny capability ids too

	// createAt: when the second topic is created (0: it exists from the
	// start); createCount: its partitions then. drawCreate.
	createAt    time.Duration
	createCount int

	machine group.Config
	gateway gatewaySettings
	client  clientSettings

	net netFaults

	produceEvery  time.Duration // mean time between producer bursts
	produceBurst  int           // records per burst, at most
	churnEvery    time.Duration // mean time between membership changes
	coordCrash    time.Duration // mean time between coordinator crashes (0: none)
	coordDownMax  time.Duration
	readyCrash    float64       // chance per Ready of a crash before persist, and again after
	gatewayCrash  time.Duration // mean time between gateway restarts (0: none)
	gatewayDown   time.Duration
	cutEvery      time.Duration // mean time between network partitions (0: none)
	cutMax        time.Duration // longest partition
	batchWindow   time.Duration // the coordinator loop gathers requests this long
	brokerLatency time.Duration // most a broker takes to answer

	replicas replicaSettings // coordinator replicas (Options.Replicas > 1)

	// unownedRunMin: the coordinator's driver writes a Ready's unowned
	// partitions as unowned blocks from this many of a topic on
	// (driver.SetUnownedRunMin; 0: its default, 64, which the sim's
	// topics never reach). drawUnownedRunMin.
	unownedRunMin int

	// Gateways that poll without acknowledging (the lag rule,
	// coordinator/group/lag.go): a gateway stuck applying nothing for up
	// to stuckMax, on average every stuckEvery; a sync-token holder
	// polling as gateway "rogue" every rogueEvery with after=0 (or, with
	// rogueStale, the seq of its first answer) through the faulty phase.
	stuckEvery time.Duration // 0: never
	stuckMax   time.Duration
	rogueEvery time.Duration // 0: no rogue
	rogueStale bool
	// A full gateway table (fill_test.go): with rogueIDs > 0 the
	// sync-token holder polls under that many ids ("rogue-0" …) each
	// rogueEvery instead of as "rogue"; with gatewayNewIDs a gateway
	// restarting polls under a new id ("gw-1.3"), never leaving its old.
	rogueIDs      int
	gatewayNewIDs bool

	// Member tokens: with memberTTL, each expires memberTTL after the
	// join or renewal that minted it, and the SDK renews its member
	// memberRenew before (client/driver: a carry-over with renew_token,
	// else a leave and a join anew); 0: they never expire.
	memberTTL   time.Duration
	memberRenew time.Duration
}

// gatewaySettings are one gateway's sync client settings.
type gatewaySettings struct {
	syncTimeout time.Duration
	syncWait    time.Duration
	maxWait     time.Duration // clamp on a fetch's long poll
	skew        []time.Duration
}

// clientSettings are the consumer shell's settings (client.Config).
type clientSettings struct {
	heartbeatWait   time.Duration
	fetchMaxWait    time.Duration
	requestTimeout  time.Duration
	revokeTimeout   time.Duration
	expiryMargin    time.Duration
	retryBackoff    time.Duration
	retryBackoffMax time.Duration
	bufferMaxBytes  int64
	pollMaxRecords  int
	pollDelayMax    time.Duration // user processing time before the next poll
	commitEvery     time.Duration
	hookDelayMax    time.Duration
}

// netFaults are the network's per-message fault rates.
type netFaults struct {
	latencyMax time.Duration
	drop       float64
	dup        float64
	delay      float64 // chance of an extra delay (reordering)
	delayMax   time.Duration
	// stall: chance that a request its client retries with the same
	// content (a join with its Idempotency-Key, a commit or release, a
	// leave) is held past its sender's deadline and lands after the
	// sender gave up on it — while, or after, the retry that giving up
	// sends (to the next replica, with replicas) is answered: a slow
	// leader's write, a proxy's queue. stallMax: how far past the
	// deadline it lands. drawStalls.
	stall    float64
	stallMax time.Duration
}

const recordBytes = 100

// draw draws values from a seed's rng.
type draw struct{ rng *rand.Rand }

// pick draws an int in [lo, hi].
func (d draw) pick(lo, hi int) int { return lo + d.rng.IntN(hi-lo+1) }

// dur draws a duration in [lo, hi].
func (d draw) dur(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(d.rng.Int64N(int64(hi-lo)+1))
}

func drawProfile(rng *rand.Rand) profile {
	d := draw{rng}
	harsh := rng.Float64() // 0 calm .. 1 harsh
	p := profile{gateways: d.pick(1, 3), consumers: d.pick(2, 6), static: rng.Float64()}
	p.initialConsumers = d.pick(1, p.consumers)
	drawTopics(d, &p)
	p.machine = drawMachine(d)
	drawGateways(d, &p)
	p.client = drawClient(d, p.machine)
	p.net = netFaults{
		latencyMax: d.dur(200*time.Microsecond, 5*time.Millisecond),
		drop:       harsh * 0.04 * rng.Float64(),
		dup:        harsh * 0.05 * rng.Float64(),
		delay:      harsh * 0.05 * rng.Float64(),
		delayMax:   d.dur(10*time.Millisecond, 3*time.Second),
	}
	drawWorkload(d, &p)
	drawCrashes(d, &p, harsh)
	drawLaggards(d, &p)
	return p
}

// drawLaggards draws the gateways that poll without acknowledging: in
// half the seeds gateways get stuck (for up to twice gateway_timeout, so
// both the lag rule and silence-free waits are exercised), in half a
// rogue sync-token holder polls.
func drawLaggards(d draw, p *profile) {
	if d.rng.IntN(2) == 0 {
		p.stuckEvery = d.dur(30*time.Second, 180*time.Second)
		p.stuckMax = d.dur(time.Second, 2*p.machine.GatewayTimeout)
	}
	if d.rng.IntN(2) == 0 {
		p.rogueEvery = d.dur(50*time.Millisecond, 2*time.Second)
		p.rogueStale = d.rng.IntN(2) == 0
	}
}

// drawTopics draws one topic, or two, of 8–24 partitions in all.
func drawTopics(d draw, p *profile) {
	total := d.pick(8, 24)
	if d.rng.IntN(2) == 0 {
		p.topics, p.partitions = []string{"orders"}, []int32{int32(total)}
		return
	}
	first := d.pick(1, total-1)
	p.topics, p.partitions = []string{"orders", "payments"}, []int32{int32(first), int32(total - first)}
}

// drawGateways draws the sync settings (sync_timeout below gateway_timeout
// − max_clock_skew) and each gateway's clock offset.
func drawGateways(d draw, p *profile) {
	p.gateway = gatewaySettings{
		syncTimeout: d.dur(7*time.Second, p.machine.GatewayTimeout-p.machine.MaxClockSkew-time.Second),
		syncWait:    p.machine.SyncWaitMax,
		maxWait:     5 * time.Second,
	}
	for range p.gateways {
		p.gateway.skew = append(p.gateway.skew, d.dur(-p.machine.MaxClockSkew, p.machine.MaxClockSkew))
	}
}

// drawClient draws the consumer shell's settings and its user's pace.
func drawClient(d draw, m group.Config) clientSettings {
	return clientSettings{
		heartbeatWait: m.HeartbeatWait, fetchMaxWait: d.dur(2*time.Second, 5*time.Second),
		requestTimeout: d.dur(2*time.Second, 5*time.Second), revokeTimeout: 5 * time.Second,
		expiryMargin: 2 * time.Second, retryBackoff: 20 * time.Millisecond, retryBackoffMax: time.Second,
		bufferMaxBytes: 64 << 10, pollMaxRecords: d.pick(5, 100), pollDelayMax: d.dur(time.Millisecond, 200*time.Millisecond),
		commitEvery: d.dur(time.Second, 5*time.Second), hookDelayMax: d.dur(0, 100*time.Millisecond),
	}
}

// drawWorkload draws subscriptions, topic growth, admin revokes, the
// producer, churn and the coordinator loop's batching.
func drawWorkload(d draw, p *profile) {
	p.pattern = d.rng.Float64()
	if d.rng.IntN(2) == 0 {
		p.growAt, p.growTopic, p.growBy = d.dur(time.Minute, 8*time.Minute), d.rng.IntN(len(p.topics)), d.pick(1, 4)
	}
	if d.rng.IntN(2) == 0 {
		p.adminEvery = d.dur(20*time.Second, 120*time.Second)
		p.denyJTI = d.rng.IntN(2) == 0
	}
	p.produceEvery = d.dur(100*time.Millisecond, 500*time.Millisecond)
	p.produceBurst = d.pick(1, 5)
	p.churnEvery = d.dur(4*time.Second, 10*time.Second)
	p.batchWindow = []time.Duration{0, time.Millisecond, 5 * time.Millisecond}[d.rng.IntN(3)]
	p.brokerLatency = d.dur(100*time.Microsecond, 3*time.Millisecond)
}

// drawMachine draws the coordinator's settings around the defaults.
func drawMachine(d draw) group.Config {
	c := group.DefaultConfig()
	c.HandoffTimeout = d.dur(3*time.Second, 12*time.Second)
	c.CapabilityLease = d.dur(15*time.Second, 60*time.Second)
	c.SyncLogMax = []int{4, 64, 10000}[d.rng.IntN(3)]
	if d.rng.IntN(4) == 0 {
		c.MaxMovesPerSecond = d.pick(1, 4)
	}
	return c
}

// drawCrashes sets the rates of crashes and partitions; a quarter of the
// seeds have none of a kind.
func drawCrashes(d draw, p *profile, harsh float64) {
	some := func() bool { return d.rng.IntN(4) != 0 }
	if some() {
		p.coordCrash = d.dur(40*time.Second, 300*time.Second)
		p.coordDownMax = d.dur(100*time.Millisecond, 12*time.Second)
		p.readyCrash = harsh * 0.004
	}
	if some() {
		p.gatewayCrash = d.dur(40*time.Second, 300*time.Second)
		p.gatewayDown = d.dur(50*time.Millisecond, 5*time.Second)
	}
	if some() {
		p.cutEvery = d.dur(15*time.Second, 120*time.Second)
		p.cutMax = d.dur(time.Second, 30*time.Second)
	}
}

// drawStalls draws the network's stalls of retried requests
// (netFaults.stall): in three seeds in four up to 3 % of them, landing
// up to 1 to 8 s after their sender gave up. From its own stream, so the
// other draws stay what they were.
func drawStalls(seed uint64) (chance float64, max time.Duration) {
	d := draw{rand.New(rand.NewPCG(seed, 0x57a1_1ed0))}
	if d.rng.IntN(4) == 0 {
		return 0, 0
	}
	return 0.03 * d.rng.Float64(), d.dur(time.Second, 8*time.Second)
}

// drawMemberTokens draws the member tokens' life: in half the seeds 8 s to
// 2 min (the SDK renewing 1 s to half of it before), so members renew
// dozens of times a run, under every fault; in the other half none. From
// its own stream, so the seeds without keep the draws they had.
func drawMemberTokens(seed uint64) (ttl, renew time.Duration) {
	d := draw{rand.New(rand.NewPCG(seed, 0x3e3b_e7ed))}
	if d.rng.IntN(2) == 0 {
		return 0, 0
	}
	ttl = d.dur(8*time.Second, 2*time.Minute)
	return ttl, d.dur(time.Second, ttl/2)
}

// drawCreate draws, in half the seeds of two topics, the second topic
// ("payments") created mid-run, 30 s to two fifths of the faulty phase
// in (4 min of the CI sweep's 10), with the partitions it
// was drawn: every consumer subscribes to it from its join on (by name,
// or by pattern), so a metadata read of the coordinator finds a new
// topic, and the live patterns' matches among the new names are made by
// the shell before the loop takes them (group.LivePatterns.MatchAdded,
// the Hits of group.Topics) as coordinator/metadata.go makes them. From
// its own stream, so the other draws stay what they were.
func drawCreate(seed uint64, p *profile, run time.Duration) {
	d := draw{rand.New(rand.NewPCG(seed, 0x0c4e_a7ed))}
	if len(p.topics) < 2 || d.rng.IntN(2) == 0 {
		return
	}
	p.createAt, p.createCount = d.dur(30*time.Second, run*2/5), int(p.partitions[1])
	p.partitions[1] = 0
}

// drawUnownedRunMin draws, in half the seeds, 1 to 3 as the number of a
// topic's partitions one Ready must leave unowned for the coordinator to
// write them as unowned blocks (coordinator/driver/unowned.go): the
// seeds then crash and restore around that path. From its own stream, so
// the other draws stay what they were.
func drawUnownedRunMin(seed uint64) int {
	d := draw{rand.New(rand.NewPCG(seed, 0x0b10_c4ed))}
	if d.rng.IntN(2) == 0 {
		return 0
	}
	return d.pick(1, 3)
}
