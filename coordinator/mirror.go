package coordinator

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.uber.org/zap"

	"github.com/capgate/capgate/ocap"
)

// mirror copies committed offsets into Kafka's own group offsets
// (mirror_offsets), off the event loop. The loop adds offsets; one
// goroutine commits what accumulated, so a slow broker coalesces commits
// instead of queueing them (the pending set is bounded by the partitions
// of the groups).
//
// Kafka's group names are shared with every native consumer of the
// cluster, so the mirror writes only the Kafka groups this deployment
// owns: every commit carries the deployment's marker (mirrorMarker) as
// its metadata, and before writing a group the mirror asks Kafka
// (broker.GroupOwner) whether a native consumer group uses the name and
// whether every committed offset there carries this marker. A group that
// is not ours is refused — its offsets dropped, a WARN naming it when it
// becomes refused, capgate_coordinator_mirror_refusals_total — and capgate
// itself serves it as ever. The decision is cached per Kafka group for
// mirrorOwnerTTL (at most mirrorOwnersMax groups); a failed write forgets
// it, so the next round asks again.
//
// The check cannot protect a native group that Kafka holds nothing for
// yet (not started, or its offsets expired): the name is free, and the
// mirror's commits would decide where that group starts. So the Kafka
// group is mirror_offsets_prefix + the capgate group, "capgate." by
// default (DefaultMirrorOffsetsPrefix); an empty prefix needs
// mirror_offsets_unprefixed, which accepts that (validateMirror).
type mirror struct {
	mu      sync.Mutex
	pending map[string]map[string]map[int32]int64
	signal  chan struct{}

	// run's goroutine only:
	owners  map[string]mirrorOwner // by Kafka group name
	refused int                    // entries of owners not owned
	// unprefixedLooked holds the capgate groups whose own (unprefixed)
	// Kafka name was looked at for offsets an unprefixed mirror left
	// there (leftover), at most mirrorOwnersMax.
	unprefixedLooked map[string]struct{}

	refusals      prometheus.Counter
	refusedGroups prometheus.Gauge
}

// mirrorOwner is one cached ownership decision.
type mirrorOwner struct {
	owned   bool
	reason  string // why not owned
	checked time.Time
}

const (
	// mirrorOwnerTTL is how long an ownership decision is reused: a
	// group that became refusable (a native app took the name, or wrote
	// into it) is found within it, a refused one that was freed (its
	// Kafka group deleted) is mirrored again within it. Each check is
	// three requests to the group's Kafka coordinator.
	mirrorOwnerTTL = time.Minute
	// mirrorOwnersMax bounds the cached decisions; a group past it is
	// checked again on its next write.
	mirrorOwnersMax = 10000
)

func newMirror() *mirror {
	return &mirror{
		pending: make(map[string]map[string]map[int32]int64),
		signal:  make(chan struct{}, 1),
		owners:  make(map[string]mirrorOwner),

		unprefixedLooked: make(map[string]struct{}),
		refusals: prometheus.NewCounter(prometheus.CounterOpts{Name: "capgate_coordinator_mirror_refusals_total",
			Help: "Rounds of a group's committed offsets mirror_offsets did not write because the Kafka group of that name is not this deployment's (a native consumer group, or offsets another writer committed)."}),
		refusedGroups: prometheus.NewGauge(prometheus.GaugeOpts{Name: "capgate_coordinator_mirror_groups_refused",
			Help: "Kafka groups mirror_offsets currently refuses to write (cached decisions)."}),
	}
}

// mirrorMarker is the commit metadata that marks a Kafka group's offsets
// as written by this deployment: its issuer (coordinator.id) and gateway
// pool (coordinator.cluster), quoted. Replicas of one deployment share it;
// another deployment on the same Kafka differs in one of them.
func mirrorMarker(id, cluster string) string {
	return "capgate-mirror iss=" + strconv.Quote(id) + " aud=" + strconv.Quote(cluster)
}

// DefaultMirrorOffsetsPrefix starts the Kafka group names the mirror
// writes unless configured otherwise, as Kafka Connect's sink groups
// start with "connect-": native groups do not use it, so no capgate
// group's name can be a native group's (redteam7 #5).
const DefaultMirrorOffsetsPrefix = "capgate."

// validateMirror checks mirror_offsets_prefix (empty, or a name as
// capgate's groups are: ocap.NameRule) and that an empty one, which
// writes into the names native groups use, was chosen knowingly
// (mirror_offsets_unprefixed). Every refusal says how to fix it.
func (c Config) validateMirror() error {
	switch {
	case c.MirrorOffsetsPrefix != "" && !ocap.ValidName(c.MirrorOffsetsPrefix):
		return fmt.Errorf("mirror_offsets_prefix: must be empty or %s, got %q", ocap.NameRule, c.MirrorOffsetsPrefix)
	case c.MirrorOffsetsUnprefixed && c.MirrorOffsetsPrefix != "":
		return fmt.Errorf("mirror_offsets_unprefixed: true mirrors each group under its own name, but mirror_offsets_prefix is %q: "+
			"set mirror_offsets_prefix: \"\" as well, or remove mirror_offsets_unprefixed to write %q + group", c.MirrorOffsetsPrefix, c.MirrorOffsetsPrefix)
	case c.MirrorOffsets && c.MirrorOffsetsPrefix == "" && !c.MirrorOffsetsUnprefixed:
		return fmt.Errorf("mirror_offsets_prefix: empty with mirror_offsets: true would write each group's offsets under its own name in Kafka, "+
			"where a tenant can take a native consumer group's name before the native app first commits (or after Kafka expired its offsets) "+
			"and choose where it starts: set mirror_offsets_prefix (default %q), or set mirror_offsets_unprefixed: true to accept that", DefaultMirrorOffsetsPrefix)
	}
	return nil
}

// add records one committed offset; it never blocks.
func (m *mirror) add(group, topic string, partition int32, offset int64) {
	m.mu.Lock()
	topics := m.pending[group]
	if topics == nil {
		topics = make(map[string]map[int32]int64)
		m.pending[group] = topics
	}
	if topics[topic] == nil {
		topics[topic] = make(map[int32]int64)
	}
	topics[topic][partition] = offset
	m.mu.Unlock()
	select {
	case m.signal <- struct{}{}:
	default:
	}
}

func (m *mirror) take() map[string]map[string]map[int32]int64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := m.pending
	m.pending = make(map[string]map[string]map[int32]int64)
	return out
}

// run commits pending offsets until ctx is done. A failed commit is
// logged and dropped: the next commit of the partition carries a newer
// offset, and capgate's own store stays the source of truth.
func (m *mirror) run(ctx context.Context, c *Coordinator) {
	c.metrics.registry.MustRegister(m.refusals, m.refusedGroups)
	marker := mirrorMarker(c.cfg.ID, c.cfg.Cluster)
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.signal:
		}
		for group, offsets := range m.take() {
			m.write(ctx, c, marker, group, offsets)
		}
	}
}

// write mirrors one group's offsets if its Kafka group is ours.
func (m *mirror) write(ctx context.Context, c *Coordinator, marker, group string, offsets map[string]map[int32]int64) {
	name := c.cfg.MirrorOffsetsPrefix + group
	if name != group {
		m.leftover(ctx, c, marker, group)
	}
	if !m.owns(ctx, c, marker, group, name) {
		m.refusals.Inc()
		return
	}
	if err := c.broker.CommitMarkedGroupOffsets(ctx, name, marker, offsets); err != nil {
		// Kafka refuses a simple commit while a native group of that
		// name has members: ask again before the next write.
		m.forget(name)
		if ctx.Err() == nil {
			c.log.Warn("mirror offsets to kafka", zap.String("group", group), zap.String("kafka_group", name), zap.Error(err))
		}
	}
}

// leftover looks once per capgate group (per process) at the Kafka group
// of the group's own name when the mirror writes prefixed names: one an
// unprefixed mirror of this deployment wrote before (an upgrade, or a
// prefix set later) still holds its last offsets, marked as ours, and a
// native consumer group starting under that name would resume from them
// until Kafka expires them (offsets.retention.minutes after the last
// commit). The mirror never writes or deletes there; a WARN names the
// group so the operator can delete it. A failed look is not repeated: a
// deployment whose Kafka ACLs cover only the prefixed names would pay
// three refused requests per group and round.
func (m *mirror) leftover(ctx context.Context, c *Coordinator, marker, group string) {
	if _, ok := m.unprefixedLooked[group]; ok {
		return
	}
	if len(m.unprefixedLooked) >= mirrorOwnersMax {
		clear(m.unprefixedLooked) // looked at again, at most once per group in each run of mirrorOwnersMax
	}
	m.unprefixedLooked[group] = struct{}{}
	got, err := c.broker.GroupOwner(ctx, group, marker)
	switch {
	case err != nil:
		if ctx.Err() == nil {
			c.log.Debug("mirror offsets to kafka: cannot look for offsets an unprefixed mirror left", zap.String("group", group), zap.Error(err))
		}
	case got.Owned() && got.Offsets > 0:
		c.log.Warn("mirror offsets to kafka: the kafka group of the capgate group's own name holds offsets this deployment mirrored before "+
			"mirror_offsets_prefix applied; a native consumer group of that name would resume from them instead of its auto.offset.reset "+
			"until Kafka expires them: delete it (kafka-consumer-groups --delete --group <name>)",
			zap.String("group", group), zap.String("kafka_group", group), zap.Int("offsets", got.Offsets),
			zap.String("mirrored_to", c.cfg.MirrorOffsetsPrefix+group))
	}
}

// owns decides whether the mirror may write the Kafka group name (of
// capgate's group), from the cache or by asking Kafka. A failed check
// refuses this round and is not cached.
func (m *mirror) owns(ctx context.Context, c *Coordinator, marker, group, name string) bool {
	now := c.now()
	if o, ok := m.owners[name]; ok && now.Sub(o.checked) < mirrorOwnerTTL {
		return o.owned
	}
	got, err := c.broker.GroupOwner(ctx, name, marker)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("mirror offsets to kafka: cannot check who owns the kafka group; not written",
				zap.String("group", group), zap.String("kafka_group", name), zap.Error(err))
		}
		return false
	}
	m.remember(c, group, name, mirrorOwner{owned: got.Owned(), reason: got.Reason(), checked: now})
	return got.Owned()
}

// remember caches a decision, logging when a group becomes refused (or
// its reason changes) and when a refused one is mirrored again.
func (m *mirror) remember(c *Coordinator, group, name string, o mirrorOwner) {
	prev, known := m.owners[name]
	switch {
	case !o.owned && (!known || prev.owned || prev.reason != o.reason):
		c.log.Warn("mirror offsets to kafka: refused, the kafka group is not this deployment's; capgate serves the group as ever",
			zap.String("group", group), zap.String("kafka_group", name), zap.String("reason", o.reason))
	case o.owned && known && !prev.owned:
		c.log.Info("mirror offsets to kafka: the kafka group is free again, mirroring", zap.String("group", group), zap.String("kafka_group", name))
	}
	if !known && len(m.owners) >= mirrorOwnersMax {
		m.evict(c.now())
	}
	m.forget(name)
	m.owners[name] = o
	if !o.owned {
		m.refused++
	}
	m.refusedGroups.Set(float64(m.refused))
}

// evict makes room: expired decisions first, else any one.
func (m *mirror) evict(now time.Time) {
	for name, o := range m.owners {
		if now.Sub(o.checked) >= mirrorOwnerTTL {
			m.forget(name)
		}
	}
	for name := range m.owners {
		if len(m.owners) < mirrorOwnersMax {
			break
		}
		m.forget(name)
	}
}

func (m *mirror) forget(name string) {
	if o, ok := m.owners[name]; ok {
		delete(m.owners, name)
		if !o.owned {
			m.refused--
		}
	}
	m.refusedGroups.Set(float64(m.refused))
}
