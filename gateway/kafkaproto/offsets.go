package kafkaproto

// Behavior: OffsetCommit v2–v9 and OffsetFetch v1–v9.
//
//   - OffsetCommit goes through capgate: each partition must be held by
//     the member (its capgate session fetches it), and its offset becomes
//     the session's progress, committed by the coordinator with the
//     partition's current capability (so a fenced epoch is refused there
//     too). Partitions no longer held answer ILLEGAL_GENERATION (classic)
//     or STALE_MEMBER_EPOCH (KIP-848) — the errors that make clients
//     rejoin; an unknown or expired member UNKNOWN_MEMBER_ID; an offset
//     below the committed one POLICY_VIOLATION (capgate never moves a
//     committed offset back; logged with what to run instead:
//     commitpolicy.go), one beyond the log end OFFSET_OUT_OF_RANGE.
//   - Kafka's admin commit (no member id, generation -1: kadm
//     CommitOffsets, kafka-consumer-groups --reset-offsets) answers
//     POLICY_VIOLATION on each partition of a topic it may see, logged
//     the same way (commitpolicy.go). A refusal the coordinator gives one partition of
//     a commit is reported on every partition of that OffsetCommit (the
//     session commits them together).
//   - A partition that does not exist (or of a topic that does not)
//     answers UNKNOWN_TOPIC_OR_PARTITION, one of a topic the connection
//     may not see TOPIC_AUTHORIZATION_FAILED whether it exists or not —
//     Kafka's answers, which it gives before any group check; the other
//     partitions of the request are committed as usual
//     (commitPartitionError).
//   - Commit metadata is kept: it goes to the coordinator with the offset
//     it came with, and OffsetFetch answers it (as Kafka does). Metadata
//     longer than MaxCommitMetadataBytes answers OFFSET_METADATA_TOO_LARGE
//     for that partition, which is not committed. A commit of the offset
//     already committed does not replace its metadata.
//   - A member is used only by the client that opened it (groups.own):
//     another client naming its member id gets UNKNOWN_MEMBER_ID.
//   - The generation (classic) must be the member's current or previous
//     one (a commit racing its own rejoin); a KIP-848 member epoch at most
//     the current one: capgate's capabilities, not Kafka's epochs, fence
//     commits. Per partition, the generation (epoch) must be at least the
//     one the partition was handed to the client at (member.handedAt): a
//     commit from an earlier holding's position is ILLEGAL_GENERATION /
//     STALE_MEMBER_EPOCH, as is any commit of a partition being told
//     again after an administrator's offsets reset (member.retell) — so
//     a reset is never undone by the position the client had before it.
//   - OffsetFetch answers the member's held partitions from its session
//     (the committed offset it was granted — another member's commit
//     handed over, an admin reset — or the one its client committed
//     since), others from the coordinator's committed offsets; -1 when
//     nothing was committed — a partition that does not exist too, with
//     no error, as Kafka answers OffsetFetch v1+ (UNKNOWN_TOPIC_OR_PARTITION
//     was v0's, ZooKeeper-stored offsets): the client applies its own
//     reset policy (auto.offset.reset, kgo's ConsumeResetOffset,
//     KafkaJS's fromBeginning) with ListOffsets. A grant of a partition
//     with nothing committed names the group's offset_reset
//     (api.Grant.OffsetReset); the member takes it as "nothing committed"
//     (clientPolicyApplies), so the group's offset_reset never overrides
//     the client's policy here, and a member that ends without its client
//     committing releases the partition without an offset (never the
//     resolved reset position as a commit).
//   - OffsetFetch of a topic the connection may not see (outside its
//     credential's tps, Kafka's and capgate's internal topics) answers
//     each named partition offset -1 with TOPIC_AUTHORIZATION_FAILED and
//     leaves such a topic out of an all-topics answer — Kafka's answer in
//     every version from v1, per partition, never at the group level —
//     whoever committed it (a member of the group whose credential
//     covers the topic); its offsets are never read (topicsAuthorized).
//   - An OffsetFetch naming no member, from a client without a member in
//     the group, is Kafka's admin read (offsetsadmin.go): the
//     coordinator's committed offsets, for a credential that may join the
//     group. One naming a member id this client did not open is
//     UNKNOWN_MEMBER_ID.
//   - Bounds (Kafka has none): at most offsetFetchGroupsMax groups (v8+),
//     the rest INVALID_REQUEST as DescribeGroups'; at most
//     offsetFetchPartitionsMax partitions in the answer, a group beyond
//     INVALID_REQUEST (the request's top-level error in v2–v7; v0–v1 have
//     none and answer no topics); a group named again is read from the
//     coordinator once; every coordinator read of the request within one
//     request_timeout, and a client hanging up (or half-closing, or the
//     listener closing) ends the coordinator read in flight at once: the
//     request is answered as for an unreachable coordinator
//     (COORDINATOR_LOAD_IN_PROGRESS, the rest not read; hangup.go). Refusals are logged through
//     refusallog, an unreachable coordinator once per request.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

// MaxCommitMetadataBytes bounds one partition's commit metadata: the
// coordinator's default commit_metadata_bytes (Kafka's
// offset.metadata.max.bytes is 4096 too).
const MaxCommitMetadataBytes = 4096

func handleOffsetCommit(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetCommitRequest)
	resp := req.ResponseKind().(*kmsg.OffsetCommitResponse)
	code := c.groupAllowed(req.Group, time.Now())
	admin := code == 0 && req.MemberID == "" && req.Generation < 0 // Kafka's admin commit
	m := c.s.groups.own(req.Group, req.MemberID, c.key())
	switch {
	case code != 0:
	case admin:
		code = kerr.PolicyViolation.Code
	case m == nil:
		code = kerr.UnknownMemberID.Code
	case m.kip848 && (req.Generation < 1 || req.Generation > m.currentEpoch()):
		code = kerr.StaleMemberEpoch.Code
	case !m.kip848 && !m.generationOK(req.Generation):
		code = kerr.IllegalGeneration.Code
	}
	offsets := map[session.Partition]int64{}
	meta := map[session.Partition]string{}
	tooLarge := map[session.Partition]bool{}
	if code == 0 {
		for _, t := range req.Topics {
			for _, p := range t.Partitions {
				sp := session.Partition{Topic: t.Topic, Partition: p.Partition}
				if p.Metadata != nil && len(*p.Metadata) > MaxCommitMetadataBytes {
					tooLarge[sp] = true
					continue
				}
				offsets[sp] = p.Offset
				if p.Metadata != nil {
					meta[sp] = *p.Metadata
				}
			}
		}
	}
	var codes map[session.Partition]api.Code
	var below map[session.Partition]int64
	if len(offsets) > 0 {
		ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestTimeout)
		codes, below = m.commit(ctx, req.Generation, offsets, meta)
		cancel()
	}
	for _, t := range req.Topics {
		rt := kmsg.NewOffsetCommitResponseTopic()
		rt.Topic = t.Topic
		for _, p := range t.Partitions {
			rp := kmsg.NewOffsetCommitResponseTopicPartition()
			rp.Partition, rp.ErrorCode = p.Partition, code
			sp := session.Partition{Topic: t.Topic, Partition: p.Partition}
			switch {
			case code != 0:
			case tooLarge[sp]:
				rp.ErrorCode = kerr.OffsetMetadataTooLarge.Code
			default:
				rp.ErrorCode = commitError(codes[sp], m.kip848)
			}
			if notTheMembers(rp.ErrorCode) || admin {
				rp.ErrorCode = c.commitPartitionError(t.Topic, p.Partition, rp.ErrorCode)
			}
			if rp.ErrorCode == kerr.PolicyViolation.Code {
				c.refusedByPolicy(m, refusedCommit{group: req.Group, topic: t.Topic, partition: p.Partition, offset: p.Offset, admin: admin}, below)
			}
			rt.Partitions = append(rt.Partitions, rp)
		}
		resp.Topics = append(resp.Topics, rt)
	}
	return resp, nil
}

// refusedByPolicy logs a partition's commit refused POLICY_VIOLATION,
// with the member's committed offset (below: the offset the member's
// session refused it under; else the coordinator's, as the member
// knows it).
func (c *conn) refusedByPolicy(m *member, r refusedCommit, below map[session.Partition]int64) {
	if !r.admin {
		p := session.Partition{Topic: r.topic, Partition: r.partition}
		if off, ok := below[p]; ok {
			r.committed = off
		} else {
			r.committed, _ = m.committed(p)
		}
	}
	c.s.commitPolicy.refused(r, c.logFields(false), time.Now())
}

// notTheMembers reports whether a commit answer says the partition is
// not the member's (or the member is gone): the answers a partition that
// does not exist would otherwise get.
func notTheMembers(code int16) bool {
	return code == kerr.IllegalGeneration.Code || code == kerr.StaleMemberEpoch.Code || code == kerr.UnknownMemberID.Code
}

// commitPartitionError is Kafka's answer for a committed partition
// refused as not the member's: Kafka checks the topic's authorization,
// then that the partition exists (KafkaApis, before the group
// coordinator), so a topic the principal may not see answers
// TOPIC_AUTHORIZATION_FAILED whether it exists or not (as Metadata), a
// partition that does not exist UNKNOWN_TOPIC_OR_PARTITION, and only an
// existing one the group's refusal (code). Asked only on refusals, so a
// commit of held partitions never waits for the topic list; a list that
// cannot be read keeps code.
func (c *conn) commitPartitionError(topic string, partition int32, code int16) int16 {
	ctx, cancel := context.WithTimeout(c.ctx, c.s.cfg.RequestTimeout)
	defer cancel()
	ti, known := c.s.topics.partitionKnown(ctx, topic, partition)
	switch {
	case known == kerr.LeaderNotAvailable.Code:
		return code
	case !c.sees(topic, ti):
		return kerr.TopicAuthorizationFailed.Code
	case known != 0:
		return known
	}
	return code
}

func (m *member) currentEpoch() int32 {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.epoch
}

func (m *member) generationOK(generation int32) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return generation == m.epoch || generation == m.prev && m.prev > 0
}

// offsetFetchGroupsMax bounds the groups one OffsetFetch (v8+) answers:
// DescribeGroups' bound, answered the same way (the rest
// INVALID_REQUEST, not worked on).
const offsetFetchGroupsMax = describeGroupsMax

// offsetFetchPartitionsMax bounds the partitions one OffsetFetch answer
// carries, over all its groups: those a request names (counted as
// named, duplicates too, before any work) and those an all-topics read
// finds committed. A group that would take the answer beyond answers
// INVALID_REQUEST without its partitions.
const offsetFetchPartitionsMax = 10000

// offsetFetch is what one OffsetFetch request shares across its groups:
// its context (ended when the client hangs up or the listener closes,
// and after request_timeout for all the coordinator reads together),
// the partitions its answer may still carry, the admin reads it made
// (one per group, however often the group is named) and what it
// refused, for one log line.
type offsetFetch struct {
	ctx       context.Context
	left      int
	committed map[string]committedRead
	refused   int
	why       string
	readErr   error // the first coordinator read that failed
}

// committedRead is one admin read of a group's committed offsets.
type committedRead struct {
	resp    api.OffsetsResponse
	err     error
	tooMany bool // all its committed partitions would not fit the answer
}

func handleOffsetFetch(c *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.OffsetFetchRequest)
	resp := req.ResponseKind().(*kmsg.OffsetFetchResponse)
	c.watchHangUp(func(ctx context.Context) {
		ctx, cancel := context.WithTimeout(ctx, c.s.cfg.RequestTimeout)
		defer cancel()
		f := &offsetFetch{ctx: ctx, left: offsetFetchPartitionsMax, committed: map[string]committedRead{}}
		if req.Version < 8 {
			g := c.fetchGroupOffsets(f, req.Group, nil, req.Topics == nil, topicsOf(req.Topics), namedPartitions(req.Topics))
			resp.ErrorCode = g.ErrorCode
			for _, t := range g.Topics {
				rt := kmsg.NewOffsetFetchResponseTopic()
				rt.Topic = t.Topic
				for _, p := range t.Partitions {
					rp := kmsg.NewOffsetFetchResponseTopicPartition()
					rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata, rp.ErrorCode = p.Partition, p.Offset, p.LeaderEpoch, p.Metadata, p.ErrorCode
					rt.Partitions = append(rt.Partitions, rp)
				}
				resp.Topics = append(resp.Topics, rt)
			}
		} else {
			for i, rg := range req.Groups {
				if i >= offsetFetchGroupsMax {
					out := kmsg.NewOffsetFetchResponseGroup()
					out.Group, out.ErrorCode = rg.Group, kerr.InvalidRequest.Code
					resp.Groups = append(resp.Groups, out)
					f.refuse(fmt.Sprintf("%d groups, at most %d answered", len(req.Groups), offsetFetchGroupsMax))
					continue
				}
				if hungUp(ctx) { // the rest answered as the coordinator unreachable, not read
					out := kmsg.NewOffsetFetchResponseGroup()
					out.Group, out.ErrorCode = rg.Group, kerr.CoordinatorLoadInProgress.Code
					resp.Groups = append(resp.Groups, out)
					continue
				}
				resp.Groups = append(resp.Groups, c.fetchGroupOffsets(f, rg.Group, rg.MemberID, rg.Topics == nil, groupTopicsOf(rg.Topics), namedGroupPartitions(rg.Topics)))
			}
		}
		if f.readErr != nil && !hungUp(ctx) {
			c.s.log.Info("kafka OffsetFetch: the coordinator's committed offsets are unavailable", zap.Error(f.readErr))
		}
		if f.refused > 0 {
			c.s.refused.Refused("kafka OffsetFetch", f.why+": answered INVALID_REQUEST",
				append(c.logFields(false), zap.Int("groups_refused", f.refused))...)
		}
	})
	return resp, nil
}

// refuse counts one group refused INVALID_REQUEST, for why.
func (f *offsetFetch) refuse(why string) {
	if f.refused == 0 {
		f.why = why
	}
	f.refused++
}

// unavailable notes a coordinator read that failed (logged once per
// request).
func (f *offsetFetch) unavailable(err error) {
	if f.readErr == nil {
		f.readErr = err
	}
}

// namedPartitions counts the partitions a v0–v7 request names.
func namedPartitions(ts []kmsg.OffsetFetchRequestTopic) int {
	n := 0
	for _, t := range ts {
		n += max(len(t.Partitions), 1)
	}
	return n
}

// namedGroupPartitions counts the partitions one v8+ group names.
func namedGroupPartitions(ts []kmsg.OffsetFetchRequestGroupTopic) int {
	n := 0
	for _, t := range ts {
		n += max(len(t.Partitions), 1)
	}
	return n
}

func groupTopicsOf(ts []kmsg.OffsetFetchRequestGroupTopic) map[string][]int32 {
	out := map[string][]int32{}
	for _, t := range ts {
		out[t.Topic] = t.Partitions
	}
	return out
}

func topicsOf(ts []kmsg.OffsetFetchRequestTopic) map[string][]int32 {
	out := map[string][]int32{}
	for _, t := range ts {
		out[t.Topic] = t.Partitions
	}
	return out
}

// fetchGroupOffsets answers one group: the member named by id (or, for
// requests that name none, this client's member of the group).
//
// named is how many partitions the group's topics name (a topic naming
// none counts one): beyond what the answer may still carry the group is
// refused INVALID_REQUEST before any work, and so is an answer that
// would take it beyond (an all-topics read of many committed partitions).
func (c *conn) fetchGroupOffsets(f *offsetFetch, group string, id *string, all bool, wanted map[string][]int32, named int) kmsg.OffsetFetchResponseGroup {
	out := kmsg.NewOffsetFetchResponseGroup()
	out.Group = group
	if out.ErrorCode = c.groupAllowed(group, time.Now()); out.ErrorCode != 0 {
		return out
	}
	if named > f.left {
		f.refuse(fmt.Sprintf("over %d partitions named", offsetFetchPartitionsMax))
		out.ErrorCode = kerr.InvalidRequest.Code
		return out
	}
	refused := c.unauthorizedTopics(wanted)
	out = c.memberGroupOffsets(f, out, id, all, wanted)
	out = c.topicsAuthorized(out, refused)
	n := 0
	for _, t := range out.Topics {
		n += len(t.Partitions)
	}
	if n > f.left {
		f.refuse(fmt.Sprintf("over %d partitions to answer", offsetFetchPartitionsMax))
		out.ErrorCode, out.Topics = kerr.InvalidRequest.Code, nil
		return out
	}
	f.left -= n
	return out
}

// unauthorizedTopics takes the named topics the connection may not
// describe out of wanted and returns them: Kafka checks each topic's
// Describe before the group coordinator sees the request, so they are
// never read.
func (c *conn) unauthorizedTopics(wanted map[string][]int32) map[string][]int32 {
	var refused map[string][]int32
	for topic, parts := range wanted {
		if c.sees(topic, topicInfo{}) {
			continue
		}
		if refused == nil {
			refused = map[string][]int32{}
		}
		refused[topic] = parts
		delete(wanted, topic)
	}
	return refused
}

// topicsAuthorized is Kafka's answer for the topics a principal may not
// describe (KafkaApis' OffsetFetch, every version from v1): a named one
// answers each of its partitions offset -1 with TOPIC_AUTHORIZATION_FAILED
// (no metadata, no leader epoch) — unless the group itself answered an
// error, which is then the whole answer —; one an all-topics read found
// committed is left out. Before, a named one answered its committed
// offset, though the connection may not read the topic.
func (c *conn) topicsAuthorized(out kmsg.OffsetFetchResponseGroup, refused map[string][]int32) kmsg.OffsetFetchResponseGroup {
	out.Topics = slices.DeleteFunc(out.Topics, func(t kmsg.OffsetFetchResponseGroupTopic) bool { return !c.sees(t.Topic, topicInfo{}) })
	if out.ErrorCode != 0 {
		return out
	}
	for _, topic := range slices.Sorted(maps.Keys(refused)) {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = topic
		for _, p := range refused[topic] {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			rp.Partition, rp.Offset, rp.LeaderEpoch, rp.Metadata = p, -1, -1, kmsg.StringPtr("")
			rp.ErrorCode = kerr.TopicAuthorizationFailed.Code
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	return out
}

// memberGroupOffsets answers one allowed group: from the member named by
// id (or this client's member of the group), else Kafka's admin read.
func (c *conn) memberGroupOffsets(f *offsetFetch, out kmsg.OffsetFetchResponseGroup, id *string, all bool, wanted map[string][]int32) kmsg.OffsetFetchResponseGroup {
	group := out.Group
	m := c.memberOf(group, id)
	if m == nil && (id == nil || *id == "") {
		return c.fetchCommittedOffsets(f, out, all, wanted) // no member: Kafka's admin read (offsetsadmin.go)
	}
	if m == nil {
		out.ErrorCode = kerr.UnknownMemberID.Code
		return out
	}
	// The coordinator's committed offsets, read once if needed. When they
	// cannot be read the group answers COORDINATOR_LOAD_IN_PROGRESS
	// (retriable): never -1, which would make the client apply its reset
	// policy to a partition that has a committed offset.
	var stored map[session.Partition]api.CommittedOffset
	var storedErr error
	needed := false // an answer depends on the coordinator's offsets
	load := func() {
		if stored == nil && storedErr == nil {
			stored, storedErr = c.storedOffsets(f.ctx, m)
		}
	}
	committed := func(p session.Partition) (int64, string) {
		if off, ok := m.committed(p); ok {
			if off < 0 {
				return -1, "" // granted with nothing committed, and nothing since
			}
			if text, ok := m.metadata(p, off); ok {
				return off, text
			}
			load() // granted at an offset another member committed: its metadata is the coordinator's
			if o, ok := stored[p]; ok && o.Offset == off {
				return off, o.Metadata
			}
			return off, ""
		}
		load()
		needed = true
		if o, ok := stored[p]; ok {
			return o.Offset, o.Metadata
		}
		return -1, ""
	}
	if all {
		load()
		needed = true
		for p := range stored {
			wanted[p.Topic] = append(wanted[p.Topic], p.Partition)
		}
	}
	for topic, parts := range wanted {
		rt := kmsg.NewOffsetFetchResponseGroupTopic()
		rt.Topic = topic
		for _, p := range parts {
			rp := kmsg.NewOffsetFetchResponseGroupTopicPartition()
			off, text := committed(session.Partition{Topic: topic, Partition: p})
			rp.Partition, rp.LeaderEpoch, rp.Offset, rp.Metadata = p, -1, off, kmsg.StringPtr(text)
			rt.Partitions = append(rt.Partitions, rp)
		}
		out.Topics = append(out.Topics, rt)
	}
	if needed && storedErr != nil {
		f.unavailable(fmt.Errorf("group %q: %w", group, storedErr))
		out.ErrorCode, out.Topics = kerr.CoordinatorLoadInProgress.Code, nil
		if api.NeedsRejoin(client.CodeOf(storedErr)) && !m.active() {
			// The member ended. One still active is alive here while its
			// capgate member is renewed (a leave and a join: the read
			// presented the old member token) or rejoins after the
			// coordinator removed it: retriable. UNKNOWN_MEMBER_ID made
			// KafkaJS and kgo join as a new member beside the live one.
			out.ErrorCode = kerr.UnknownMemberID.Code
		}
	}
	return out
}

// noCommittedOffset is a held partition's start offset when nothing was
// committed: the session's "release without an offset", OffsetFetch's -1.
const noCommittedOffset = -1

// clientPolicyApplies makes the grants in a coordinator's answer whose
// offset the group's offset_reset chose (nothing committed) start at
// noCommittedOffset: the Kafka client, told -1 by OffsetFetch, applies
// its own reset policy and fetches from where it chose; the session
// commits only what the client commits, and releases without an offset
// until then. Grants at a committed offset are kept: OffsetFetch answers
// that offset (a handoff's, an admin reset's), as Kafka answers one.
// Called on every answer before the driver takes it.
func clientPolicyApplies(a *driver.Answered) {
	for _, gs := range [][]api.Grant{a.Join.Grants, a.News.Grants, a.News.Renew} {
		for i := range gs {
			if gs[i].OffsetReset != "" {
				gs[i].Offset = noCommittedOffset
			}
		}
	}
}

// memberOf finds the member by id, or this client's member of group.
func (c *conn) memberOf(group string, id *string) *member {
	if id != nil && *id != "" {
		return c.s.groups.own(group, *id, c.key())
	}
	for _, m := range c.s.groups.ofKey(c.key()) {
		if m.group == group {
			return m
		}
	}
	return nil
}

// storedOffsets reads the group's committed offsets from the coordinator.
// ctx is the request's (offsetFetch).
func (c *conn) storedOffsets(ctx context.Context, m *member) (map[session.Partition]api.CommittedOffset, error) {
	out := map[session.Partition]api.CommittedOffset{}
	resp, err := c.s.groups.api.Offsets(ctx, m.group, m.token())
	if err != nil {
		return nil, err
	}
	for _, o := range resp.Offsets {
		out[session.Partition{Topic: o.Topic, Partition: o.Partition}] = o
	}
	return out, nil
}
