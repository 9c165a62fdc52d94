package client

import (
	"sync"
	"time"

	"github.com/capgate/capgate/api"
)

// refusalLog bounds the log of retriable fetch refusals as unanswered
// does fetches no gateway answered: a gateway that throttles (429
// rate_limited under an operator's QoS byte rate, too_many_fetches) or
// has lost its coordinator (503 out_of_sync, not_ready, overloaded)
// refuses every partition's fetch, and each is retried after its
// Retry-After — one warning per partition and retry flooded the log (41
// lines in 12 s for one throttled group; 12 a second per 12 partitions
// while the coordinator was down). Each code is logged the first time,
// then at most once per unansweredLogEvery with the count of refusals
// not logged. Refusals that are not retried (a revoked capability, an
// offset out of range) are logged each time by logFetch. Safe for
// concurrent use.
type refusalLog struct {
	mu     sync.Mutex
	byCode map[api.Code]*logThrottle
}

// refused records a refusal with code at now and says whether to log it,
// with how many refusals of that code went unlogged before it.
func (r *refusalLog) refused(code api.Code, now time.Time) (log bool, missed int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.byCode == nil {
		r.byCode = map[api.Code]*logThrottle{}
	}
	t := r.byCode[code]
	if t == nil {
		t = &logThrottle{}
		r.byCode[code] = t
	}
	return t.due(now)
}
