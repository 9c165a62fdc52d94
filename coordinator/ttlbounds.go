package coordinator

import (
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
}

// refusal words a ttl_ms out of the bound for the one who asked: the ttl
// asked, the bound in milliseconds and in human units and, above it, the
// setting it comes from with what to do (details limit and max, in ms,
// as every limit refusal gives them); "" when ms is within the bound.
// `capgate admin grant --ttl 1h` against the default max_lease reads:
// ttl_ms 3600000 (1h0m0s) is above coordinator.max_lease (10m0s): ask for
// at most 600000 (10m0s), or raise coordinator.max_lease.
func (b ttlBound) refusal(ms int64) (string, map[string]any) {
	ttl := msDuration(ms)
	switch {
	case ttl < b.min:
		return fmt.Sprintf("ttl_ms %s is below %d (%s): %s lasts at least %s", msText(ms), b.min.Milliseconds(), b.min, b.lasts, b.min), nil
	case ttl > b.max:
		return fmt.Sprintf("ttl_ms %s is above %s (%s): ask for at most %d (%s), or raise %s",
				msText(ms), b.key, b.max, b.max.Milliseconds(), b.max, b.key),
			map[string]any{"limit": b.key, "max": b.max.Milliseconds()}
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
