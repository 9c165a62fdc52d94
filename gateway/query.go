package gateway

import (
	"math"
	"time"

	"github.com/valyala/fasthttp"
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

// parseFetchQuery refuses unknown and repeated parameters and anything that
// is not a plain decimal number; it returns a message for the 400.
func (g *Gateway) parseFetchQuery(args *fasthttp.Args) (fetchQuery, string) {
	q := fetchQuery{offset: -1, maxBytes: g.cfg.DefaultFetchBytes}
	var seen [3]bool
	for key, value := range args.All() {
		var i int
		switch string(key) {
		case paramOffset:
			i = 0
		case paramMaxBytes:
			i = 1
		case paramMaxWaitMs:
			i = 2
		default:
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
		n, ok := parseDecimal(value)
		if !ok {
			if i == 0 {
				return q, "offset must be a non-negative decimal integer, earliest or latest"
			}
			if i == 1 {
				return q, "max_bytes must be a positive decimal integer"
			}
			return q, string(key) + " must be a non-negative decimal integer"
		}
		switch i {
		case 0:
			q.offset = n
		case 1:
			if n == 0 {
				return q, "max_bytes must be a positive decimal integer"
			}
			q.maxBytes = int32(min(n, int64(g.cfg.MaxFetchBytes)))
		case 2:
			q.maxWait = min(time.Duration(min(n, math.MaxInt64/int64(time.Millisecond)))*time.Millisecond, g.cfg.MaxWait)
		}
	}
	if !seen[0] {
		return q, "offset is required: ?offset=N (the first record wanted), ?offset=earliest or ?offset=latest"
	}
	return q, ""
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

// parseDecimal reads a non-negative decimal integer of ASCII digits only
// (no sign, no spaces). Values beyond int64 saturate at MaxInt64 (callers
// clamp or, for offsets, the broker answers 416).
func parseDecimal(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			n = math.MaxInt64
			continue
		}
		n = n*10 + d
	}
	return n, true
}

// parsePartition reads a path partition: decimal digits, at most
// 2147483647.
func parsePartition(b []byte) (int32, bool) {
	n, ok := parseDecimal(b)
	if !ok || n > math.MaxInt32 {
		return 0, false
	}
	return int32(n), true
}

// quoteParam quotes a parameter name for an error message, bounded.
func quoteParam(b []byte) string {
	if len(b) > 64 {
		b = b[:64]
	}
	return `"` + string(b) + `"`
}
