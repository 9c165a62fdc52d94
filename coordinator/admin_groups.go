package coordinator

// Behavior: admin, groups resource — bearer: an admin token.
//   GET /v1/admin/groups?after=&limit=&summaries=true → GroupsResponse,
//     names sorted, at most describe_page_max (or limit) after after;
//     next_after when more follow. With summaries=true, each listed
//     group's summary too (admin_groupsummary.go: read with the names,
//     so every name has one), at most groupSummariesPageMax a page.
//   GET /v1/admin/groups/{g}?limit=&members_after=&partitions_after=topic/N
//     → GroupDescription: config, the tenant that created it (creator:
//     what limits.groups_per_credential counts it for), live members
//     (each with the credential that opened it), partitions with owner, epoch, state, committed
//     offset and lag (latest offset − committed, read from Kafka
//     best-effort within broker_timeout, for pages of up to
//     describe_lag_max partitions); one page: at most describe_page_max
//     (or limit) members and partitions, members within
//     describe_bytes_max; next_members_after / next_partitions_after
//     resume; 404 for an unknown group, 400 for a bad cursor or limit.
//   DELETE /v1/admin/groups/{g}?force=true → GroupDeleteResponse: the
//     group's committed offsets, settings and leases go and it no longer
//     lists or describes (group/delete.go: its epochs stay until the
//     reaper forgets it, so no capability it issued reads again). 409
//     conflict while it has live members or outside lease holders,
//     unless force=true: each member is then revoked first (its
//     capabilities refused by every gateway, as revoke-member) and each
//     lease ends. 404 for an unknown group.
//   PUT /v1/admin/groups/{g}/config with GroupConfigRequest → the
//     resulting GroupConfigView; creates the group if needed; 400 for a
//     setting out of bounds, 409 inconsistent_assignor when members use
//     another assignor.

import (
	"context"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleAdminGroups(ctx *fasthttp.RequestCtx, _ []string) {
	q, ok := c.pageQuery(ctx, "after", "summaries")
	if !ok {
		return
	}
	summaries, problem := queryBool(q, "summaries")
	if problem != "" {
		writeError(ctx, api.CodeBadRequest, problem)
		return
	}
	limit := q.limit
	if summaries {
		limit = min(limit, groupSummariesPageMax)
	}
	var names []string
	var more bool
	var sums []group.GroupSummary
	if err := c.query(func(m *group.Machine) {
		names, more = m.GroupsPage(q.get("after"), limit)
		if summaries {
			sums = summarizeAll(m, names, c.cfg.DescribeLagMax)
		}
	}); err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	out := GroupsResponse{Groups: names}
	if out.Groups == nil {
		out.Groups = []string{}
	}
	if more {
		out.NextAfter = names[len(names)-1]
	}
	if summaries {
		out.Summaries = c.summaryViews(sums)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// queryBool reads an optional true|false query parameter.
func queryBool(q pageParams, name string) (bool, string) {
	value, given := q.cursors[name]
	if !given {
		return false, ""
	}
	b, err := strconv.ParseBool(value)
	if err != nil {
		return false, fmt.Sprintf("%s must be true or false, got %.32q", name, value)
	}
	return b, ""
}

func (c *Coordinator) handleAdminGroup(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	q, ok := c.pageQuery(ctx, "members_after", "partitions_after")
	if !ok {
		return
	}
	page := group.Page{Limit: q.limit, Bytes: c.cfg.DescribeBytesMax, MembersAfter: q.get("members_after")}
	if after := q.get("partitions_after"); after != "" {
		ref, ok := partitionCursor(after)
		if !ok {
			writeError(ctx, api.CodeBadRequest, "partitions_after must be topic/partition")
			return
		}
		page.PartitionsAfter = &ref
	}
	var d group.GroupDescription
	var rest group.Rest
	found := false
	if err := c.query(func(m *group.Machine) { d, rest, found = m.DescribePage(groupName, page) }); err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	if !found {
		writeError(ctx, api.CodeNotFound, "unknown group "+groupName)
		return
	}
	out := describeView(d)
	c.countPatternMatches(out.Members, d.Members)
	if rest.MembersAfter != nil {
		out.NextMembersAfter = *rest.MembersAfter
	}
	if p := rest.PartitionsAfter; p != nil {
		out.NextPartitionsAfter = p.Topic + "/" + strconv.Itoa(int(p.Partition))
	}
	if len(out.Partitions) <= c.cfg.DescribeLagMax {
		c.fillLag(out.Partitions, out.Config.OffsetReset)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// countPatternMatches sets each pattern member's topic_pattern_matches:
// the topics the machine resolved its pattern to (as its join's answer
// counted them; a stale member's, what it still follows), absent before
// the first metadata read. A member whose pattern matches nothing holds
// no partition and its group read Stable with 0 partitions, nothing
// saying why (newuser5 #19). Counted by the machine, not matched again
// here: a page of members with distinct patterns was as many matches.
func (c *Coordinator) countPatternMatches(members []MemberView, described []group.MemberDescription) {
	if c.topics.Load() == nil {
		return
	}
	for i := range members {
		if members[i].TopicPattern != "" {
			n := described[i].TopicPatternMatches
			members[i].TopicPatternMatches = &n
		}
	}
}

// topicPatternStale is a stale pattern member's topic_pattern_stale.
const topicPatternStale = "a later match of its topic_pattern (topics were added, or the coordinator restarted) took more than " +
	group.TopicPatternStepsLimit + ": it keeps the topics it matched before and follows no topic created since until it rejoins " +
	"(then its pattern is matched again, and refused 400 if it is still over the bound: anchor it with literal text, or subscribe to a topic list)"

func describeView(d group.GroupDescription) GroupDescription {
	out := GroupDescription{
		Group: d.Group, Creator: d.Creator, CreatorName: d.CreatorName, Config: configView(d.Config), MovesHeldBack: d.MovesHeldBack,
		Members: make([]MemberView, 0, len(d.Members)), Partitions: make([]PartitionView, 0, len(d.Partitions)),
	}
	for _, m := range d.Members {
		v := MemberView{
			ID: m.ID, InstanceID: m.InstanceID, ClientID: m.ClientID, Topics: m.Topics, TopicPattern: m.TopicPattern,
			SessionTimeoutMs: m.SessionTimeout.Milliseconds(), LastContact: timeText(m.LastContact), Partitions: m.Partitions,
		}
		if m.Credential.ID != "" {
			v.Credential = &CredentialView{ID: m.Credential.ID, Issuer: m.Credential.Issuer, Subject: m.Credential.Subject}
		}
		if m.TopicPatternStale {
			v.TopicPatternStale = topicPatternStale
		}
		out.Members = append(out.Members, v)
	}
	for _, p := range d.Partitions {
		v := PartitionView{
			Topic: p.Topic, Partition: p.Partition, Epoch: p.Epoch, State: string(p.State),
			Owner: p.Owner, OwnerOutside: p.OwnerOutside, OwnerEpoch: p.OwnerEpoch,
			Target: p.Target, TargetOutside: p.TargetOutside,
			CapabilityExpiresAt: timeText(p.CapabilityExpiry), RevokeStarted: timeText(p.RevokeStarted),
			GatewaysSafe: p.GatewaysSafe, Released: p.Released, Metadata: p.Metadata,
		}
		if p.Committed >= 0 {
			committed := p.Committed
			v.Committed = &committed
		}
		if p.LeaseHolder != "" {
			v.Lease = &LeaseView{Holder: p.LeaseHolder, Outside: p.LeaseOutside, Until: timeText(p.LeaseUntil)}
		}
		out.Partitions = append(out.Partitions, v)
	}
	return out
}

// fillLag looks up the latest offsets of partitions (cached, a few at a
// time) and fills LatestOffset and Lag where Kafka answered in time. A
// partition nothing was committed for lags from where its next holder
// starts: the earliest offset, or none with offset_reset latest.
func (c *Coordinator) fillLag(parts []PartitionView, offsetReset string) {
	c.lookupLogEnds(len(parts), func(i int) (string, int32) { return parts[i].Topic, parts[i].Partition },
		func(i int, earliest, latest int64) {
			p := &parts[i]
			p.LatestOffset = &latest
			lag := partitionLag(p.Committed, earliest, latest, offsetReset)
			p.Lag = &lag
		})
}

// partitionLag is a partition's lag: from its committed offset, or from
// where its next holder starts when nothing was committed (the earliest
// offset, or none with offset_reset latest); never below 0.
func partitionLag(committed *int64, earliest, latest int64, offsetReset string) int64 {
	start := earliest
	switch {
	case committed != nil:
		start = *committed
	case offsetReset == "latest":
		start = latest
	}
	return max(latest-start, 0)
}

// lookupLogEnds looks up the earliest and latest offsets of n partitions
// (ref names the i-th; cached, resolveWorkers at a time, within
// broker_timeout) and hands each that Kafka answered to found.
func (c *Coordinator) lookupLogEnds(n int, ref func(i int) (string, int32), found func(i int, earliest, latest int64)) {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.BrokerTimeout)
	defer cancel()
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(resolveWorkers, n) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				topic, partition := ref(i)
				if earliest, latest, err := c.offsets.lookup(ctx, topic, partition); err == nil {
					found(i, earliest, latest)
				}
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

func (c *Coordinator) handleAdminGroupDelete(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	force := false
	for key, value := range ctx.QueryArgs().All() {
		b, err := strconv.ParseBool(string(value))
		if string(key) != "force" || err != nil {
			writeError(ctx, api.CodeBadRequest, "the only query parameter is force=true|false")
			return
		}
		force = b
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.DeleteGroup{Ref: ref, Group: groupName, Force: force}
	})
	reply, ok := msg.(group.DeleteGroupReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, GroupDeleteResponse{Group: groupName, MembersRevoked: reply.Members, LeasesEnded: reply.Leases, OffsetsDeleted: reply.Offsets})
}

func (c *Coordinator) handleAdminGroupConfig(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	var req GroupConfigRequest
	if !decodeBody(ctx, &req, false) || !c.checkGroupConfig(ctx, req) {
		return
	}
	msg, err := c.call(func(ref group.Ref) group.Event {
		return group.SetGroupConfig{
			Ref: ref, Group: groupName, Assignor: req.Assignor, OffsetReset: req.OffsetReset,
			SessionTimeout: msPointer(req.SessionTimeoutMs), HandoffTimeout: msPointer(req.HandoffTimeoutMs),
			MaxMovesPerSecond: req.MaxMovesPerSecond,
		}
	})
	reply, ok := msg.(group.GroupConfigReply)
	if !ok {
		writeMachineError(ctx, msg, err)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, configView(reply.Config))
}

// checkGroupConfig refuses a *_ms setting out of its range in the
// request's words: the field, the value given in ms and human units, the
// range and its settings (msRange). The machine checks every setting
// again (GroupConfig.validate, in durations); max_moves_per_second,
// offset_reset and assignor are refused there, naming the value and what
// is allowed.
func (c *Coordinator) checkGroupConfig(ctx *fasthttp.RequestCtx, req GroupConfigRequest) bool {
	ranges := []struct {
		ms *int64
		r  msRange
	}{
		{req.SessionTimeoutMs, c.sessionTimeoutRange("")},
		{req.HandoffTimeoutMs, msRange{field: "handoff_timeout_ms", lo: time.Millisecond, hi: c.cfg.Groups.HandoffTimeoutMax,
			settings: "coordinator.groups.handoff_timeout_max"}},
	}
	for _, f := range ranges {
		if f.ms == nil {
			continue
		}
		if problem, details := f.r.refusal(*f.ms); problem != "" {
			writeErrorDetails(ctx, api.CodeBadRequest, "group config: "+problem, details)
			return false
		}
	}
	return true
}

func configView(g group.GroupConfig) GroupConfigView {
	return GroupConfigView{
		Assignor: g.Assignor, SessionTimeoutMs: g.SessionTimeout.Milliseconds(), HandoffTimeoutMs: g.HandoffTimeout.Milliseconds(),
		MaxMovesPerSecond: g.MaxMovesPerSecond, OffsetReset: g.OffsetReset,
	}
}

// timeText renders t as RFC 3339 in UTC with milliseconds, "" for zero.
func timeText(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format("2006-01-02T15:04:05.000Z07:00")
}

// msDuration is a request's *_ms as a duration, saturated at the
// longest duration there is (and the most negative): a huge ttl_ms must
// fail the bounds it is checked against, never wrap around to a short
// one (a lease of 9223372036854776 ms wrapped to 192 µs, fenced its
// partition and ended before the grant) or to a negative one.
func msDuration(ms int64) time.Duration {
	const limit = int64(math.MaxInt64 / time.Millisecond)
	switch {
	case ms > limit:
		return math.MaxInt64
	case ms < -limit:
		return math.MinInt64
	}
	return time.Duration(ms) * time.Millisecond
}

func msPointer(ms *int64) *time.Duration {
	if ms == nil {
		return nil
	}
	d := msDuration(*ms)
	return &d
}

// pageParams is the query of a paged admin read: limit, and the cursors
// the route names.
type pageParams struct {
	limit   int
	cursors map[string]string
}

func (p pageParams) get(name string) string { return p.cursors[name] }

// pageQuery reads limit (1..describe_page_max, default the max) and the
// named cursors, refusing any other parameter or repeat with 400.
func (c *Coordinator) pageQuery(ctx *fasthttp.RequestCtx, cursors ...string) (pageParams, bool) {
	p := pageParams{limit: c.cfg.DescribePageMax, cursors: map[string]string{}}
	seen := map[string]bool{}
	for key, value := range ctx.QueryArgs().All() {
		name := string(key)
		switch {
		case seen[name]:
			writeError(ctx, api.CodeBadRequest, "query parameter "+name+" given more than once")
			return p, false
		case name == "limit":
			n, problem := c.pageLimit(value)
			if problem != "" {
				writeError(ctx, api.CodeBadRequest, problem)
				return p, false
			}
			p.limit = n
		case slices.Contains(cursors, name):
			p.cursors[name] = string(value)
		default:
			writeError(ctx, api.CodeBadRequest, "unknown query parameter "+strconv.Quote(name))
			return p, false
		}
		seen[name] = true
	}
	return p, true
}

// pageLimit reads a page's limit (1..describe_page_max, the API's one
// spelling of a number), or says what is wrong with it.
func (c *Coordinator) pageLimit(value []byte) (int, string) {
	n, ok := api.ParseDecimal(value, int64(c.cfg.DescribePageMax))
	if !ok || n < 1 {
		return 0, fmt.Sprintf("limit must be a decimal integer from 1 to %d (coordinator.describe_page_max) without sign or leading zeros, got %.32q",
			c.cfg.DescribePageMax, value)
	}
	return int(n), ""
}

// partitionCursor parses "topic/partition".
func partitionCursor(s string) (group.PartitionRef, bool) {
	topic, number, ok := strings.Cut(s, "/")
	p, valid := api.ParsePartition(number)
	if !ok || !valid || topic == "" {
		return group.PartitionRef{}, false
	}
	return group.PartitionRef{Topic: topic, Partition: p}, true
}
