package coordinator

// Behavior: admin, a group's summary — bearer: an admin token.
//   GET /v1/admin/groups/{g}/summary → GroupSummary: the group's config,
//     how many members and partitions it has (all of them, not a page's),
//     its partitions by state, the moves max_moves_per_second holds back,
//     and its lag (the sum of what a describe shows per partition, read
//     from Kafka as the describe does: absent over describe_lag_max
//     partitions, or when Kafka answered for none). What a list of
//     groups shows (the console's groups page), without a describe's
//     members and partitions: the page described each of its 100 groups
//     whole at every re-read. 404 for an unknown group; a query parameter
//     is 400.

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator/group"
)

func (c *Coordinator) handleAdminGroupSummary(ctx *fasthttp.RequestCtx, params []string) {
	groupName := params[0]
	if !groupParam(ctx, groupName) {
		return
	}
	for key := range ctx.QueryArgs().All() {
		writeError(ctx, api.CodeBadRequest, "unknown query parameter "+strconv.Quote(string(key))+": a group's summary takes none")
		return
	}
	var s group.GroupSummary
	found := false
	if err := c.query(func(m *group.Machine) { s, found = m.Summarize(groupName, c.cfg.DescribeLagMax) }); err != nil {
		writeMachineError(ctx, nil, err)
		return
	}
	if !found {
		writeError(ctx, api.CodeNotFound, "unknown group "+groupName)
		return
	}
	writeJSON(ctx, fasthttp.StatusOK, c.summaryViews([]group.GroupSummary{s})[0])
}

// groupSummariesPageMax bounds the groups of one GET
// /v1/admin/groups?summaries=true page (next_after continues): each
// summary is counted over all the group's partitions on the loop, and
// its answer is ~200 bytes against a name's ~20.
const groupSummariesPageMax = 1000

// summarizeAll sums up each named group (on the loop); a name is one
// GroupsPage just listed, so each is found.
func summarizeAll(m *group.Machine, names []string, offsetsMax int) []group.GroupSummary {
	out := make([]group.GroupSummary, 0, len(names))
	for _, name := range names {
		if s, ok := m.Summarize(name, offsetsMax); ok {
			out = append(out, s)
		}
	}
	return out
}

// summaryViews are the answers for sums, with their lags: the log ends
// of their distinct partitions looked up once each, at most
// describe_lag_max of them for the lot (as a scrape's group lag). A
// group whose partitions do not all fit in what is left has no lag, as
// one of more than describe_lag_max partitions has none; the lag is the
// sum over the partitions Kafka answered for, absent when it answered
// for none.
func (c *Coordinator) summaryViews(sums []group.GroupSummary) []GroupSummary {
	out := make([]GroupSummary, len(sums))
	index := map[topicPartition]int{} // 1 + the partition's place in wanted
	var wanted []topicPartition
	measured := make([]bool, len(sums))
	for i, s := range sums {
		out[i] = GroupSummary{
			Group: s.Group, Config: configView(s.Config), MovesHeldBack: s.MovesHeldBack, Members: s.Members,
			Partitions: s.Partitions, Owned: s.Owned, Revoking: s.Revoking, Unowned: s.Unowned,
		}
		if s.Offsets == nil {
			continue
		}
		fresh := map[topicPartition]bool{}
		for _, p := range s.Offsets {
			if tp := (topicPartition{p.Topic, p.Partition}); index[tp] == 0 {
				fresh[tp] = true
			}
		}
		if len(wanted)+len(fresh) > c.cfg.DescribeLagMax {
			continue
		}
		for _, p := range s.Offsets {
			if tp := (topicPartition{p.Topic, p.Partition}); fresh[tp] && index[tp] == 0 {
				wanted = append(wanted, tp)
				index[tp] = len(wanted) // 1-based: 0 is not looked up yet
			}
		}
		measured[i] = true
	}
	ends := make([]*logEnds, len(wanted))
	c.lookupLogEnds(len(wanted), func(i int) (string, int32) { return wanted[i].topic, wanted[i].partition },
		func(i int, earliest, latest int64) { ends[i] = &logEnds{earliest, latest} })
	for i, s := range sums {
		if measured[i] {
			out[i].Lag = sumLag(s.Offsets, out[i].Config.OffsetReset, func(tp topicPartition) *logEnds { return ends[index[tp]-1] })
		}
	}
	return out
}

// sumLag is the sum of the partitions' lags as a describe shows them
// (partitionLag), over those whose log ends are known; nil when none.
func sumLag(parts []group.PartitionOffset, offsetReset string, ends func(topicPartition) *logEnds) *int64 {
	var sum int64
	known := false
	for _, p := range parts {
		e := ends(topicPartition{p.Topic, p.Partition})
		if e == nil {
			continue
		}
		committed := &p.Committed
		if *committed < 0 {
			committed = nil
		}
		sum, known = sum+partitionLag(committed, e.earliest, e.latest, offsetReset), true
	}
	if !known {
		return nil
	}
	return &sum
}
