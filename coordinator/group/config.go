package group

import (
	"fmt"
	"math"
	"time"

	"github.com/capgate/capgate/coordinator/assign"
	"github.com/capgate/capgate/internal/topicpattern"
)

// Offset reset policies and the start-offset sentinels a Grant carries when
// nothing was committed; the shell resolves them against Kafka (ListOffsets
// conventions: -1 latest, -2 earliest) before minting.
const (
	OffsetResetEarliest = "earliest"
	OffsetResetLatest   = "latest"

	OffsetLatest   int64 = -1
	OffsetEarliest int64 = -2
)

// What a gateway that cannot sync does (Config.SilentGateways).
const (
	SilentGatewaysFence = "fence"
	SilentGatewaysServe = "serve"
)

// Config holds the machine's settings; per-group settings start from these
// defaults and can be changed with SetGroupConfig.
type Config struct {
	// SessionTimeout is the default session of a member that names none.
	SessionTimeout    time.Duration `yaml:"session_timeout"`
	SessionTimeoutMin time.Duration `yaml:"session_timeout_min"`
	SessionTimeoutMax time.Duration `yaml:"session_timeout_max"`
	// HeartbeatWait caps how long a heartbeat is held waiting for news.
	HeartbeatWait time.Duration `yaml:"heartbeat_wait"`
	// HandoffTimeout bounds how long a revoke waits for the old holder to
	// commit and release before the partition moves anyway.
	// HandoffTimeoutMax bounds a group's handoff_timeout (PUT
	// …/groups/{g}/config): a holder that stays alive and never releases
	// keeps the next holder waiting that long, so it is bounded like
	// session_timeout (session_timeout_max: 5m, Kafka's
	// max.poll.interval.ms).
	HandoffTimeout    time.Duration `yaml:"handoff_timeout"`
	HandoffTimeoutMax time.Duration `yaml:"handoff_timeout_max"`
	// GatewayTimeout: a gateway silent longer than this is safe for every
	// fence (it has refused fetches since its own sync_timeout).
	GatewayTimeout time.Duration `yaml:"gateway_timeout"`
	// SilentGateways is what a gateway that cannot sync does, and so when
	// the coordinator counts a silent gateway safe (DESIGN §4):
	// SilentGatewaysFence ("fence", the default): the gateway refuses
	// everything once sync_timeout passed without a good poll, and a
	// gateway silent longer than gateway_timeout is safe for every fence.
	// SilentGatewaysServe ("serve"): the gateway keeps serving unexpired
	// capabilities while no coordinator answers, and silence never makes
	// it safe: a fence waits for its acknowledgement, for it to leave, or
	// for every capability the fence revokes to expire (at most the
	// longest lease granted). Gateways learn it on every reset.
	SilentGateways string `yaml:"silent_gateways"`
	// SyncWaitMax caps how long a sync poll is held; keep it below the
	// gateways' sync_timeout.
	SyncWaitMax  time.Duration `yaml:"sync_wait_max"`
	MaxClockSkew time.Duration `yaml:"max_clock_skew"`
	// RenewTokenGrace: a renewal (a rejoin with renew_token) is taken
	// with a member token expired up to this long beyond the leeway,
	// when its bearer is a fresh client credential the member is bound
	// to (or another token of its OAuth client, or IdP identity) and the
	// member is still live: a Kafka client's re-authentication that met
	// a coordinator takeover lands on the new leader after its member
	// token expired, and its member ended (every partition revoked, what
	// it read since its last commit read again). Every deny and revoked
	// member entry is kept this much longer (revocation.Rule.Retain), so
	// a revocation that could refuse such a token still does. 0: none;
	// at most RenewTokenGraceMax.
	RenewTokenGrace time.Duration `yaml:"renew_token_grace"`
	// Leeway, CapabilityLease and MaxLease are the token lifetimes: the
	// expiry leeway gateways grant, the lifetime of a granted or renewed
	// capability, and the cap on any capability's. The coordinator sets
	// them from its own settings of the same names; they are not
	// configuration keys of groups: (yaml "-").
	Leeway          time.Duration `yaml:"-"`
	CapabilityLease time.Duration `yaml:"-"`
	MaxLease        time.Duration `yaml:"-"`
	// TokenTTLMax is the longest lifetime (exp - iat) of any token the
	// coordinator mints and verifies: the longest of max_lease,
	// member_token_ttl and client_credential_ttl_max, set by the
	// coordinator like MaxLease (yaml "-"). A deny's exp is capped at
	// now + TokenTTLMax: every token it can match was minted by now, so
	// none lives longer, and the entry is not held (by the machine, the
	// store, the sync log and every gateway) past what it protects.
	TokenTTLMax time.Duration `yaml:"-"`
	// Assignor is the default assignor of a new group ("sticky" or "range").
	Assignor    string `yaml:"assignor"`
	OffsetReset string `yaml:"offset_reset"`
	// SyncLogMax bounds the sync log (~160 B an entry); older entries are
	// compacted away and gateways behind them get a reset snapshot. The
	// default, 32,768, keeps a revoke of a member holding 10,000
	// partitions (10,001 entries) a delta: each gateway reads the 10,000
	// fences, not every fence of every group (BENCHMARKS §3).
	SyncLogMax int `yaml:"sync_log_max"`
	// MaxMovesPerSecond is the default per-group limit on revokes started
	// per second (0 = unlimited; at most MaxMovesPerSecondMax).
	MaxMovesPerSecond int `yaml:"max_moves_per_second"`
	// InitialAssignDelay, InitialAssignDelayMax and InitialAssignHoldMax
	// are the join window (window.go; Kafka's
	// group.initial.rebalance.delay.ms): a group with no member assigns
	// nothing until no new member has joined for InitialAssignDelay (or
	// three times the longest gap between the window's joins, at most
	// InitialAssignDelayMax), and at the latest InitialAssignHoldMax (or
	// InitialAssignDelayMax, the longer) after its first join, whose
	// answer waits for it at most InitialAssignDelayMax. 0 assigns at
	// once (a storm's first member was granted every partition and
	// handed them back as the others came). A lone consumer's join is
	// answered InitialAssignDelay later.
	InitialAssignDelay    time.Duration `yaml:"initial_assign_delay"`
	InitialAssignDelayMax time.Duration `yaml:"initial_assign_delay_max"`
	InitialAssignHoldMax  time.Duration `yaml:"initial_assign_hold_max"`

	// Limits on what a join or a commit can make the machine hold
	// (limits.go). Past a count limit a join gets 409 limit_exceeded; a
	// request past a size limit gets 400 bad_request.
	Limits Limits `yaml:"limits"`
}

// Limits bound the state members can make the coordinator hold.
type Limits struct {
	// TopicsPerMember bounds the topics one join lists.
	TopicsPerMember int `yaml:"topics_per_member"`
	// TopicPatternBytes bounds a topic_pattern's length; TopicPatternCost
	// bounds how much its size once repetitions are expanded (program
	// instructions, estimated before compiling: topicpattern.Cost) passes
	// its length (topicpattern.Expansion): a list of topic names written
	// as an alternation costs about its length and is bounded by it.
	TopicPatternBytes int `yaml:"topic_pattern_bytes"`
	TopicPatternCost  int `yaml:"topic_pattern_cost"`
	// TopicPatternSteps bounds the work of matching a join's
	// topic_pattern against the topic list (topicpattern.Scanner steps:
	// a state of its program visited at a position of a name), which the
	// event loop does once per join that adds a pattern member.
	TopicPatternSteps int `yaml:"topic_pattern_steps"`
	// TopicPatternsPerTenant bounds the distinct topic_pattern texts one
	// tenant's live members hold (members sharing a text are matched
	// once): a join or rejoin bringing another is refused 409
	// limit_exceeded. A restore (a takeover) matches each tenant's texts
	// within 4 × topic_pattern_steps in all (restorePatternBudget).
	TopicPatternsPerTenant int `yaml:"topic_patterns_per_tenant"`
	// MembersPerGroup, GroupsPerCredential, MembersPerCredential and
	// Groups bound live members of one group, the groups one tenant has
	// live members in (and the groups it created that still exist:
	// limits.go), one tenant's live members in all groups (so one tenant
	// cannot fill state_bytes for everyone), and the groups a join may
	// create.
	MembersPerGroup      int `yaml:"members_per_group"`
	GroupsPerCredential  int `yaml:"groups_per_credential"`
	MembersPerCredential int `yaml:"members_per_credential"`
	Groups               int `yaml:"groups"`
	// StateBytes bounds the estimated bytes of members, groups,
	// partitions and committed offsets' metadata (limits.go: per member,
	// per subscribed topic, per partition, per group, measured by the
	// tests, and each metadata's bytes); a join, or a commit whose
	// metadata grows the estimate, that would pass it is refused. Keep it
	// well under coordinator.memory_limit.
	StateBytes int64 `yaml:"state_bytes"`
	// StateBytesPerTenant bounds the part of that estimate one tenant's
	// live members and the groups it created hold (limits.go: the
	// members, the groups' partitions and committed metadata), so one
	// tenant cannot fill state_bytes for everyone; at
	// most state_bytes counts. Nor may a share grow past the state_bytes
	// it would leave free (admitTenantState), so a few tenants together
	// cannot fill it either; at or above state_bytes, neither applies.
	StateBytesPerTenant int64 `yaml:"state_bytes_per_tenant"`
	// CommitMetadataBytes bounds the metadata string of one committed
	// offset (Kafka's offset.metadata.max.bytes).
	CommitMetadataBytes int `yaml:"commit_metadata_bytes"`
	// EmptyGroupTTL: a group with no members, leases or committed
	// offsets, default settings and every partition unowned is forgotten
	// once it has been so this long (reap.go); 0 keeps every group. At
	// least max_lease + leeway + max_clock_skew, so every capability it
	// ever issued has expired everywhere.
	EmptyGroupTTL time.Duration `yaml:"empty_group_ttl"`
	// OffsetsRetention (Kafka's offsets.retention.minutes): a group as
	// above but holding committed offsets is forgotten with its offsets
	// once it has been so this long (a changed offset restarts it); 0
	// keeps them for ever. At least max_lease + leeway + max_clock_skew.
	OffsetsRetention time.Duration `yaml:"offsets_retention"`
	// LeaseTTLMax bounds the ttl of an admin lease (how long one
	// partition can be pinned to a holder); a longer request is refused
	// with 400, not silently shortened, so the operator knows when the
	// pin ends.
	LeaseTTLMax time.Duration `yaml:"lease_ttl_max"`
	// QoSTTLMax bounds the ttl of a QoS override (PUT /v1/admin/qos):
	// every gateway holds each override, and every reset snapshot
	// carries it, until it expires. A longer request is refused with
	// 400, not silently shortened, so the operator knows when the
	// override ends.
	QoSTTLMax time.Duration `yaml:"qos_ttl_max"`
	// Gateways bounds the gateway ids the machine knows (gateways.go):
	// a sync poll naming a new id past it is refused with 409
	// limit_exceeded, unless a gateway silent longer than
	// gateway_timeout can be forgotten to make room (silent_gateways:
	// fence only). A known gateway is never refused.
	Gateways int `yaml:"gateways"`
	// QoSOverrides and Denied bound what admin requests add until it
	// expires: QoS overrides in force and denied token ids
	// (admin_bounds.go). A request that would add one past its bound is
	// refused with 409 limit_exceeded and changes nothing; updating a
	// known one is never refused.
	QoSOverrides int `yaml:"qos_overrides"`
	Denied       int `yaml:"denied"`
	// HeldHeartbeatsPerTenant bounds the heartbeats one tenant's members
	// (Credential.tenant, as members_per_credential counts them) have
	// held at once (members.go holdHeartbeat): each is a long poll that
	// holds a connection up to heartbeat_wait, so one tenant's members
	// could take every coordinator.max_connections slot for the price of
	// one request per heartbeat_wait each — behind trusted_proxies, where
	// only max_connections counts, for certain. One more is answered at
	// once: its news if it has any, else 429 rate_limited with
	// retry_after_ms (the session counts it as heard from). Keep it well
	// under coordinator.max_connections.
	HeldHeartbeatsPerTenant int `yaml:"held_heartbeats_per_tenant"`
}

// DefaultLimits are the documented defaults.
func DefaultLimits() Limits {
	return Limits{
		TopicsPerMember:        1000,
		TopicPatternBytes:      topicpattern.DefaultMaxBytes,
		TopicPatternCost:       topicpattern.DefaultMaxCost,
		TopicPatternSteps:      topicpattern.DefaultMaxSteps,
		TopicPatternsPerTenant: 32,
		MembersPerGroup:        10000,
		GroupsPerCredential:    100,
		MembersPerCredential:   10000,
		Groups:                 10000,
		StateBytes:             192 << 20,
		StateBytesPerTenant:    48 << 20,
		CommitMetadataBytes:    4096,
		EmptyGroupTTL:          time.Hour,
		OffsetsRetention:       7 * 24 * time.Hour,
		LeaseTTLMax:            24 * time.Hour,
		QoSTTLMax:              24 * time.Hour,
		Gateways:               1024,
		QoSOverrides:           10000,
		Denied:                 100000,

		HeldHeartbeatsPerTenant: 2000,
	}
}

// RenewTokenGraceMax bounds renew_token_grace: a few takeovers
// (~1.5–3.5 s each) and a carry-over's retries, not a second lifetime.
const RenewTokenGraceMax = 10 * time.Second

// DefaultConfig returns the documented defaults.
func DefaultConfig() Config {
	return Config{
		SessionTimeout:    10 * time.Second,
		SessionTimeoutMin: time.Second,
		SessionTimeoutMax: 5 * time.Minute,
		HeartbeatWait:     3 * time.Second,
		HandoffTimeout:    10 * time.Second,
		HandoffTimeoutMax: 5 * time.Minute,
		GatewayTimeout:    15 * time.Second,
		SilentGateways:    SilentGatewaysFence,
		SyncWaitMax:       5 * time.Second,
		MaxClockSkew:      time.Second,
		RenewTokenGrace:   5 * time.Second,
		Leeway:            2 * time.Second,
		CapabilityLease:   60 * time.Second,
		MaxLease:          10 * time.Minute,
		TokenTTLMax:       30 * 24 * time.Hour,
		Assignor:          assign.NameSticky,
		OffsetReset:       OffsetResetEarliest,
		SyncLogMax:        32768,
		Limits:            DefaultLimits(),

		InitialAssignDelay:    DefaultInitialAssignDelay,
		InitialAssignDelayMax: DefaultInitialAssignDelayMax,
		InitialAssignHoldMax:  DefaultInitialAssignHoldMax,
	}
}

// The join window's defaults (window.go): a lone consumer's first grant
// waits 50 ms; the first join's answer at most 3 s (Kafka's
// group.initial.rebalance.delay.ms is 3 s); a storm that keeps joining is
// assigned once, within 30 s of its first join (1,000 members joined in
// 7–23 s on a loaded machine: BENCHMARKS §4).
const (
	DefaultInitialAssignDelay    = 50 * time.Millisecond
	DefaultInitialAssignDelayMax = 3 * time.Second
	DefaultInitialAssignHoldMax  = 30 * time.Second
	// InitialAssignDelayLimit bounds all three: a group's members get nothing
	// for that long.
	InitialAssignDelayLimit = time.Minute
)

// MaxMovesPerSecondMax bounds max_moves_per_second: one move a
// microsecond is past any rate a coordinator starts moves at (0 is
// unlimited).
const MaxMovesPerSecondMax = 1_000_000

// saturated is the duration the shell passes for a number of
// milliseconds too large for a time.Duration (it saturates rather than
// wrap): a message says such a value is too large and names the max,
// never prints it as 2562047h47m16.854775807s.
const saturated time.Duration = math.MaxInt64

// durationRangeError is the error of a duration d outside [lo, hi]: name
// says what it is, bounds where lo and hi come from.
func durationRangeError(name string, d, lo, hi time.Duration, bounds string) error {
	if d == saturated {
		return durationMaxError(name, d, hi, bounds)
	}
	return fmt.Errorf("%s: must be within [%s, %s] (%s), got %s", name, lo, hi, bounds, d)
}

// durationMaxError is the error of a duration d above max (from bound).
func durationMaxError(name string, d, max time.Duration, bound string) error {
	if d == saturated {
		return fmt.Errorf("%s: too large, the max is %s (%s)", name, max, bound)
	}
	return fmt.Errorf("%s: must be <= %s (%s), got %s", name, max, bound, d)
}

// Validate reports the first bad setting, naming the field and the value.
func (c Config) Validate() error {
	positive := []struct {
		name  string
		value time.Duration
	}{
		{"session_timeout_min", c.SessionTimeoutMin},
		{"heartbeat_wait", c.HeartbeatWait},
		{"handoff_timeout", c.HandoffTimeout},
		{"gateway_timeout", c.GatewayTimeout},
		{"sync_wait_max", c.SyncWaitMax},
		{"capability_lease", c.CapabilityLease},
	}
	for _, f := range positive {
		if f.value <= 0 {
			return fmt.Errorf("group.%s: must be > 0, got %s", f.name, f.value)
		}
	}
	switch {
	case c.SessionTimeoutMax < c.SessionTimeoutMin:
		return fmt.Errorf("group.session_timeout_max: must be >= session_timeout_min (%s), got %s", c.SessionTimeoutMin, c.SessionTimeoutMax)
	case c.SessionTimeout < c.SessionTimeoutMin || c.SessionTimeout > c.SessionTimeoutMax:
		return fmt.Errorf("group.session_timeout: must be within [%s, %s], got %s", c.SessionTimeoutMin, c.SessionTimeoutMax, c.SessionTimeout)
	case c.HandoffTimeout > c.HandoffTimeoutMax:
		return fmt.Errorf("group.handoff_timeout: must be <= handoff_timeout_max (%s), got %s", c.HandoffTimeoutMax, c.HandoffTimeout)
	case c.MaxClockSkew < 0:
		return fmt.Errorf("group.max_clock_skew: must be >= 0, got %s", c.MaxClockSkew)
	case c.Leeway < 0:
		return fmt.Errorf("group.leeway: must be >= 0, got %s", c.Leeway)
	case c.RenewTokenGrace < 0 || c.RenewTokenGrace > RenewTokenGraceMax:
		return fmt.Errorf("group.renew_token_grace: must be within [0, %s], got %s", RenewTokenGraceMax, c.RenewTokenGrace)
	case c.SyncWaitMax >= c.GatewayTimeout-c.MaxClockSkew:
		return fmt.Errorf("group.sync_wait_max: must be < gateway_timeout - max_clock_skew (%s), got %s", c.GatewayTimeout-c.MaxClockSkew, c.SyncWaitMax)
	case c.MaxLease < c.CapabilityLease:
		return fmt.Errorf("group.max_lease: must be >= capability_lease (%s), got %s", c.CapabilityLease, c.MaxLease)
	case c.TokenTTLMax < c.MaxLease:
		return fmt.Errorf("group.token_ttl_max: must be >= max_lease (%s), got %s", c.MaxLease, c.TokenTTLMax)
	case c.SyncLogMax < 1:
		return fmt.Errorf("group.sync_log_max: must be >= 1, got %d", c.SyncLogMax)
	case c.MaxMovesPerSecond < 0 || c.MaxMovesPerSecond > MaxMovesPerSecondMax:
		return fmt.Errorf("group.max_moves_per_second: must be within [0, %d], got %d", MaxMovesPerSecondMax, c.MaxMovesPerSecond)
	case c.InitialAssignDelay < 0 || c.InitialAssignDelay > InitialAssignDelayLimit:
		return fmt.Errorf("group.initial_assign_delay: must be within [0, %s] (0: assign at once), got %s", InitialAssignDelayLimit, c.InitialAssignDelay)
	case c.InitialAssignDelay > 0 && (c.InitialAssignDelayMax < c.InitialAssignDelay || c.InitialAssignDelayMax > InitialAssignDelayLimit):
		return fmt.Errorf("group.initial_assign_delay_max: must be within [initial_assign_delay (%s), %s], got %s", c.InitialAssignDelay, InitialAssignDelayLimit, c.InitialAssignDelayMax)
	case c.InitialAssignHoldMax < 0 || c.InitialAssignHoldMax > InitialAssignDelayLimit:
		return fmt.Errorf("group.initial_assign_hold_max: must be within [0, %s] (a hold shorter than initial_assign_delay_max is raised to it), got %s", InitialAssignDelayLimit, c.InitialAssignHoldMax)
	}
	if err := c.Limits.validate(c); err != nil {
		return err
	}
	return c.validateNames()
}

func (l Limits) validate(c Config) error {
	for _, f := range []struct {
		name  string
		value int64
	}{
		{"topics_per_member", int64(l.TopicsPerMember)},
		{"topic_pattern_bytes", int64(l.TopicPatternBytes)},
		{"topic_pattern_cost", int64(l.TopicPatternCost)},
		{"topic_pattern_steps", int64(l.TopicPatternSteps)},
		{"topic_patterns_per_tenant", int64(l.TopicPatternsPerTenant)},
		{"members_per_group", int64(l.MembersPerGroup)},
		{"groups_per_credential", int64(l.GroupsPerCredential)},
		{"members_per_credential", int64(l.MembersPerCredential)},
		{"groups", int64(l.Groups)},
		{"state_bytes", l.StateBytes},
		{"state_bytes_per_tenant", l.StateBytesPerTenant},
		{"commit_metadata_bytes", int64(l.CommitMetadataBytes)},
		{"gateways", int64(l.Gateways)},
		{"qos_overrides", int64(l.QoSOverrides)},
		{"denied", int64(l.Denied)},
		{"held_heartbeats_per_tenant", int64(l.HeldHeartbeatsPerTenant)},
	} {
		if f.value <= 0 {
			return fmt.Errorf("group.limits.%s: must be > 0, got %d", f.name, f.value)
		}
	}
	if l.LeaseTTLMax < time.Second {
		return fmt.Errorf("group.limits.lease_ttl_max: must be >= 1s, got %s", l.LeaseTTLMax)
	}
	if l.QoSTTLMax < time.Second {
		return fmt.Errorf("group.limits.qos_ttl_max: must be >= 1s, got %s", l.QoSTTLMax)
	}
	if floor := c.MaxLease + c.Leeway + c.MaxClockSkew; l.EmptyGroupTTL != 0 && l.EmptyGroupTTL < floor {
		return fmt.Errorf("group.limits.empty_group_ttl: must be 0 or >= max_lease + leeway + max_clock_skew (%s), got %s", floor, l.EmptyGroupTTL)
	}
	if floor := c.MaxLease + c.Leeway + c.MaxClockSkew; l.OffsetsRetention != 0 && l.OffsetsRetention < floor {
		return fmt.Errorf("group.limits.offsets_retention: must be 0 or >= max_lease + leeway + max_clock_skew (%s), got %s", floor, l.OffsetsRetention)
	}
	return nil
}

func (c Config) validateNames() error {
	if _, ok := assign.Lookup(c.Assignor); !ok {
		return fmt.Errorf("group.assignor: unknown assignor %q", c.Assignor)
	}
	if !validOffsetReset(c.OffsetReset) {
		return fmt.Errorf("group.offset_reset: must be %q or %q, got %q", OffsetResetEarliest, OffsetResetLatest, c.OffsetReset)
	}
	if c.SilentGateways != SilentGatewaysFence && c.SilentGateways != SilentGatewaysServe {
		return fmt.Errorf("group.silent_gateways: must be %q or %q, got %q", SilentGatewaysFence, SilentGatewaysServe, c.SilentGateways)
	}
	return nil
}

func validOffsetReset(s string) bool {
	return s == OffsetResetEarliest || s == OffsetResetLatest
}

// GroupConfig is the per-group configuration: set from Config when a group
// is created, changed by SetGroupConfig, persisted as GroupRecord.
type GroupConfig struct {
	Assignor          string        `json:"assignor"`
	SessionTimeout    time.Duration `json:"session_timeout"`
	HandoffTimeout    time.Duration `json:"handoff_timeout"`
	MaxMovesPerSecond int           `json:"max_moves_per_second"`
	OffsetReset       string        `json:"offset_reset"`
}

func (c Config) groupDefaults() GroupConfig {
	return GroupConfig{
		Assignor:          c.Assignor,
		SessionTimeout:    c.SessionTimeout,
		HandoffTimeout:    c.HandoffTimeout,
		MaxMovesPerSecond: c.MaxMovesPerSecond,
		OffsetReset:       c.OffsetReset,
	}
}

// validate checks a group configuration against the machine's bounds:
// every field has a lower and an upper one.
func (g GroupConfig) validate(c Config) error {
	switch {
	case g.SessionTimeout < c.SessionTimeoutMin || g.SessionTimeout > c.SessionTimeoutMax:
		return durationRangeError("session_timeout", g.SessionTimeout, c.SessionTimeoutMin, c.SessionTimeoutMax, "groups.session_timeout_min, groups.session_timeout_max")
	case g.HandoffTimeout <= 0:
		return fmt.Errorf("handoff_timeout: must be > 0, got %s", g.HandoffTimeout)
	case g.HandoffTimeout > c.HandoffTimeoutMax:
		return durationMaxError("handoff_timeout", g.HandoffTimeout, c.HandoffTimeoutMax, "groups.handoff_timeout_max")
	case g.MaxMovesPerSecond < 0 || g.MaxMovesPerSecond > MaxMovesPerSecondMax:
		return fmt.Errorf("max_moves_per_second: must be within [0, %d] (0: unlimited), got %d", MaxMovesPerSecondMax, g.MaxMovesPerSecond)
	case !validOffsetReset(g.OffsetReset):
		return fmt.Errorf("offset_reset: must be %q or %q, got %q", OffsetResetEarliest, OffsetResetLatest, g.OffsetReset)
	}
	if _, ok := assign.Lookup(g.Assignor); !ok {
		return fmt.Errorf("assignor: unknown assignor %q", g.Assignor)
	}
	return nil
}

// resetOffset is the start offset of a partition with nothing committed.
func (g GroupConfig) resetOffset() int64 {
	if g.OffsetReset == OffsetResetLatest {
		return OffsetLatest
	}
	return OffsetEarliest
}
