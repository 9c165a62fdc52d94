package coordinator

// Behavior: admin, topics resource — bearer: an admin token.
//   GET /v1/admin/topics?after=&limit= → TopicsResponse: the topics of the
//     coordinator's last metadata read (every metadata_interval; internal
//     topics never: Kafka's __*, capgate state logs), sorted, each with its
//     partition count; at most describe_page_max (or limit) after after,
//     next_after when more follow.
//   GET /v1/admin/topics/{topic} → TopicDescription: its partitions with
//     their earliest and latest offsets (Kafka's log start offset and high
//     watermark, as the group describe's latest_offset: cached up to
//     offset_cache_ttl; absent where Kafka did not answer within
//     broker_timeout, or for a topic of more than describe_lag_max
//     partitions). 404 for a topic Kafka does not have (metadata read
//     again first, as a join naming it), 403 for an internal one, 503
//     before the first metadata read.
// There was no way to ask capgate what a topic is (its partitions, where
// its logs end) short of kcat -L through the Kafka listener (newuser5).

import (
	"maps"
	"slices"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// TopicsResponse is GET /v1/admin/topics: one page, sorted by name;
// NextAfter, when set, is the after= of the next page.
type TopicsResponse struct {
	Topics    []TopicSummary `json:"topics"`
	NextAfter string         `json:"next_after,omitempty"`
}

// TopicSummary is one topic of GET /v1/admin/topics.
type TopicSummary struct {
	Topic      string `json:"topic"`
	Partitions int32  `json:"partitions"`
}

// TopicDescription is GET /v1/admin/topics/{topic}.
type TopicDescription struct {
	Topic      string               `json:"topic"`
	Partitions []TopicPartitionView `json:"partitions"`
}

// TopicPartitionView is one partition of a topic; the offsets are absent
// where Kafka did not answer in time (or the topic has more than
// describe_lag_max partitions).
type TopicPartitionView struct {
	Partition      int32  `json:"partition"`
	EarliestOffset *int64 `json:"earliest_offset,omitempty"`
	LatestOffset   *int64 `json:"latest_offset,omitempty"`
}

// metadataRead answers 503 before the coordinator has read topic
// metadata from Kafka, and otherwise hands back the last read.
func (c *Coordinator) metadataRead(ctx *fasthttp.RequestCtx) (map[string]int32, bool) {
	counts := c.topics.Load()
	if counts == nil {
		writeError(ctx, api.CodeUnavailable, "topic metadata has not been read from Kafka yet: retry (the coordinator reads it every metadata_interval)")
		return nil, false
	}
	return *counts, true
}

func (c *Coordinator) handleAdminTopics(ctx *fasthttp.RequestCtx, _ []string) {
	q, ok := c.pageQuery(ctx, "after")
	if !ok {
		return
	}
	counts, ok := c.metadataRead(ctx)
	if !ok {
		return
	}
	names := slices.Sorted(maps.Keys(counts))
	after := q.get("after")
	names = names[sortedAfter(names, after):]
	out := TopicsResponse{Topics: make([]TopicSummary, 0, min(len(names), q.limit))}
	for _, name := range names[:min(len(names), q.limit)] {
		out.Topics = append(out.Topics, TopicSummary{Topic: name, Partitions: counts[name]})
	}
	if len(names) > q.limit {
		out.NextAfter = names[q.limit-1]
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// sortedAfter is the index of the first of sorted names above after.
func sortedAfter(names []string, after string) int {
	i, found := slices.BinarySearch(names, after)
	if found {
		i++
	}
	return i
}

func (c *Coordinator) handleAdminTopic(ctx *fasthttp.RequestCtx, params []string) {
	topic := params[0]
	if !topicParam(ctx, topic) {
		return
	}
	if len(ctx.QueryArgs().QueryString()) > 0 {
		writeError(ctx, api.CodeBadRequest, "GET /v1/admin/topics/{topic} takes no query parameters")
		return
	}
	if !c.grantableTopic(ctx, topic) {
		return
	}
	if _, ok := c.metadataRead(ctx); !ok || !c.knownTopics(ctx, []string{topic}) {
		return
	}
	n, _ := c.partitionCount(topic)
	out := TopicDescription{Topic: topic, Partitions: make([]TopicPartitionView, n)}
	for p := range out.Partitions {
		out.Partitions[p].Partition = int32(p)
	}
	if int(n) <= c.cfg.DescribeLagMax {
		c.lookupLogEnds(int(n), func(i int) (string, int32) { return topic, int32(i) }, func(i int, earliest, latest int64) {
			out.Partitions[i].EarliestOffset, out.Partitions[i].LatestOffset = &earliest, &latest
		})
	}
	writeJSON(ctx, fasthttp.StatusOK, out)
}
