package gateway

import (
	"fmt"
	"github.com/capgate/capgate/ocap"
	"math"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// fetchQuery is the parsed query of a fetch: offset is required; max_bytes
// and max_wait_ms are optional and clamped to the configured ceilings.
type fetchQuery struct {
	offset   int64
	maxBytes int32
	maxWait  time.Duration
}

const (
	paramOffset    = "offset"
	paramMaxBytes  = "max_bytes"
	paramMaxWaitMs = "max_wait_ms"
)

// fetchParams are the numeric query parameters of a fetch, in the index
// order of parseFetchQuery, with the ranges of Kafka's own fields (an
// offset is an int64, max bytes and max wait int32). Within its range a
// number is taken (max_bytes and max_wait_ms then clamped to the
// gateway's ceilings, as a Kafka broker clamps them); outside it, or
// spelled otherwise (api.ParseDecimal), it is 400 naming the parameter
// and the range, never saturated: a 416 must name the offset asked for.
var fetchParams = [3]struct {
	name     string
	min, max int64
	rule     string
}{
	{paramOffset, 0, math.MaxInt64, "offset must be earliest, latest or " + api.DecimalRule + " in [0, 9223372036854775807]"},
	{paramMaxBytes, 1, math.MaxInt32, "max_bytes must be " + api.DecimalRule + " in [1, 2147483647] (the gateway then serves at most max_fetch_bytes)"},
	{paramMaxWaitMs, 0, math.MaxInt32, "max_wait_ms must be " + api.DecimalRule + " in [0, 2147483647] (the gateway then waits at most max_wait)"},
}

// parseFetchQuery refuses unknown and repeated parameters and numbers
// outside fetchParams; it returns a message for the 400.
func (g *Gateway) parseFetchQuery(args *fasthttp.Args) (fetchQuery, string) {
	q := fetchQuery{offset: -1, maxBytes: g.cfg.DefaultFetchBytes}
	var seen [len(fetchParams)]bool
	for key, value := range args.All() {
		i := fetchParamIndex(key)
		if i < 0 {
			return q, "unknown query parameter " + quoteParam(key) + "; allowed: offset, max_bytes, max_wait_ms"
		}
		if seen[i] {
			return q, "query parameter " + string(key) + " given more than once"
		}
		seen[i] = true
		if i == 0 {
			if n, ok := offsetWord(value); ok {
				q.offset = n
				continue
			}
		}
		p := &fetchParams[i]
		n, ok := api.ParseDecimal(value, p.max)
		if !ok || n < p.min {
			return q, p.rule
		}
		switch i {
		case 0:
			q.offset = n
		case 1:
			q.maxBytes = int32(min(n, int64(g.cfg.MaxFetchBytes)))
		case 2:
			q.maxWait = min(time.Duration(n)*time.Millisecond, g.cfg.MaxWait)
		}
	}
	if !seen[0] {
		return q, "offset is required: ?offset=N (the first record wanted), ?offset=earliest or ?offset=latest"
	}
	return q, ""
}

// fetchParamIndex is key's index in fetchParams, or -1.
func fetchParamIndex(key []byte) int {
	for i := range fetchParams {
		if string(key) == fetchParams[i].name {
			return i
		}
	}
	return -1
}

// The offset words, with Kafka's ListOffsets sentinels as their values: a
// fetch at offset=earliest reads from the log start, offset=latest from
// the end. A grant whose start offset the coordinator could not look up
// carries the sentinel, and the SDK fetches with the word.
const (
	offsetEarliest int64 = -2
	offsetLatest   int64 = -1
)

func offsetWord(b []byte) (int64, bool) {
	switch string(b) {
	case "earliest":
		return offsetEarliest, true
	case "latest":
		return offsetLatest, true
	}
	return 0, false
}

// recordsTarget reads a records path's {topic} and {partition}: a Kafka
// topic name, and a partition number in its one spelling
// (api.ParsePartition: /partitions/03/ is not partition 3); otherwise the
// 400's message naming the segment. The fetch and produce handlers read
// their path with it, once.
func recordsTarget(topic, partition []byte) (int32, string) {
	if !ocap.ValidTopic(string(topic)) {
		return 0, fmt.Sprintf("topic %.64q in the path: a topic is 1 to 249 of a-z A-Z 0-9 . _ -, not . or ..", topic)
	}
	p, ok := api.ParsePartition(partition)
	if !ok {
		return 0, fmt.Sprintf("partition %.32q in the path: %s", partition, api.PartitionRule)
	}
	return p, ""
}

// quoteParam quotes a parameter name for an error message, bounded.
func quoteParam(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return `"` + string(b) + `"`
}
