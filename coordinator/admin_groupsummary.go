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
	out := GroupSummary{
		Group: s.Group, Config: configView(s.Config), MovesHeldBack: s.MovesHeldBack, Members: s.Members,
		Partitions: s.Partitions, Owned: s.Owned, Revoking: s.Revoking, Unowned: s.Unowned,
	}
	if s.Offsets != nil {
		out.Lag = c.sumLag(s.Offsets, out.Config.OffsetReset)
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// sumLag is the sum of the partitions' lags as a describe shows them
// (partitionLag), over those Kafka answered for; nil when none.
func (c *Coordinator) sumLag(parts []group.PartitionOffset, offsetReset string) *int64 {
	lags := make([]int64, len(parts))
	known := make([]bool, len(parts))
	c.lookupLogEnds(len(parts), func(i int) (string, int32) { return parts[i].Topic, parts[i].Partition },
		func(i int, earliest, latest int64) {
			committed := &parts[i].Committed
			if *committed < 0 {
				committed = nil
			}
			lags[i], known[i] = partitionLag(committed, earliest, latest, offsetReset), true
		})
	var sum int64
	measured := false
	for i, lag := range lags {
		if known[i] {
			sum, measured = sum+lag, true
		}
	}
	if !measured {
		return nil
	}
	return &sum
}
