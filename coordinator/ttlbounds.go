package coordinator

import (
	"cmp"
	"fmt"
	"math"
	"time"
)

// ttlBound is a ttl_ms a request may ask for: at least min and at most
// max, the value of the setting key (its full name, as config files and
// the docs write it).
type ttlBound struct {
	min time.Duration
	max time.Duration
	key string
	// lasts says what lives at least min ("a capability").
	lasts string
	// field is the request's field ("" is ttl_ms): the refusal's first
	// words and its details' field, which the CLI reads to word the
	// refusal as the flag the user typed (cmd/capgate flagRefusal).
	field string
}

// refusal words a ttl_ms out of the bound for the one who asked: the ttl
// asked, the bound in milliseconds and in human units and, above it, the
// setting it comes from with what to do (details field, limit and max,
// in ms, as every limit refusal gives them; below it details field and
// min); "" when ms is within the bound.
// `capgate admin grant --ttl 1h` against the default max_lease reads:
// ttl_ms 3600000 (1h0m0s) is above coordinator.max_lease (10m0s): ask for
// at most 600000 (10m0s), or raise coordinator.max_lease.
func (b ttlBound) refusal(ms int64) (string, map[string]any) {
	field := cmp.Or(b.field, "ttl_ms")
	ttl := msDuration(ms)
	switch {
	case ttl < b.min:
		return fmt.Sprintf("%s %s is below %d (%s): %s lasts at least %s", field, msText(ms), b.min.Milliseconds(), b.min, b.lasts, b.min),
			map[string]any{"field": field, "min": b.min.Milliseconds()}
	case ttl > b.max:
		return fmt.Sprintf("%s %s is above %s (%s): ask for at most %d (%s), or raise %s",
				field, msText(ms), b.key, b.max, b.max.Milliseconds(), b.max, b.key),
			map[string]any{"field": field, "limit": b.key, "max": b.max.Milliseconds()}
	}
	return "", nil
}

// msText is ms with its duration in human units ("3600000 (1h0m0s)"),
// the number alone where no duration holds it.
func msText(ms int64) string {
	if limit := int64(math.MaxInt64 / time.Millisecond); ms > limit || ms < -limit {
		return fmt.Sprint(ms)
	}
	return fmt.Sprintf("%d (%s)", ms, msDuration(ms))
}

// msRange is the range [lo, hi] a request's *_ms field (field) may take,
// from settings (their full names); zero, when not "", says what 0 (or
// leaving the field out) means, and 0 is then allowed.
type msRange struct {
	field    string
	lo, hi   time.Duration
	settings string
	zero     string
}

// refusal names the field, the value given (ms and human units), the
// range both ways and its settings, with details field, min and max (ms);
// "" when ms is in range.
func (r msRange) refusal(ms int64) (string, map[string]any) {
	if d := msDuration(ms); (ms == 0 && r.zero != "") || (ms != 0 && d >= r.lo && d <= r.hi) {
		return "", nil
	}
	zero := ""
	if r.zero != "" {
		zero = "; 0 or absent: " + r.zero
	}
	return fmt.Sprintf("%s %s is outside [%d, %d] (%s to %s: %s)%s", r.field, msText(ms), r.lo.Milliseconds(), r.hi.Milliseconds(), r.lo, r.hi, r.settings, zero),
		map[string]any{"field": r.field, "min": r.lo.Milliseconds(), "max": r.hi.Milliseconds()}
}
