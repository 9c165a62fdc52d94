package bench

import (
	"bufio"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/coordinator"
)

// fenceStages is where one bulk fence's time went, each stage measured
// from the admin call's start: what the parts themselves say, so the
// benchmark's figure comes with its breakdown (BENCHMARKS §3).
type fenceStages struct {
	// Persist is the coordinator's store writes up to the admin answer —
	// the revoke's Ready, one synchronous update (its
	// capgate_coordinator_persist_duration_seconds, PersistN updates) —;
	// the rest of the answer is the loop's step, its audit and observers,
	// and HTTP.
	Persist  time.Duration
	PersistN int
	// FirstApplied and LastApplied: the first and the last gateway to
	// have applied the fences (their "sync applied" lines: the view
	// refuses the fenced epochs from then on, and the gateway's in-flight
	// fetches under them are cancelled).
	FirstApplied, LastApplied time.Duration
	// LastAck is the last gateway's acknowledgement as the coordinator
	// stamped it (GET /v1/admin/gateways' last_seen of the acking poll, to
	// the millisecond; a later poll would only make it later).
	LastAck time.Duration
	// After is the coordinator's store writes after the answer until every
	// gateway was seen acknowledged through the admin API (the handoffs
	// the acks complete: 10,000 partitions written unowned), which the
	// admin API's read waits behind.
	After  time.Duration
	AfterN int
}

// appliedLog keeps when each gateway logged "sync applied" and at which
// seq (gateway/sync.go applySync: after the view took the update and the
// fetches it refuses were cancelled, before the next poll acknowledges).
type appliedLog struct {
	mu sync.Mutex
	at map[string][]appliedAt // by gateway
}

type appliedAt struct {
	seq uint64
	at  time.Time
}

// core returns a zap core that records part's "sync applied" lines and
// nothing else (teed beside the part's own logger).
func (l *appliedLog) core(part string) zapcore.Core {
	if !strings.HasPrefix(part, "gateway") {
		return zapcore.NewNopCore()
	}
	return appliedCore{l: l, part: part}
}

// first is, per gateway, when it first applied an update past seq.
func (l *appliedLog) first(seq uint64) map[string]time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[string]time.Time)
	for gw, list := range l.at {
		for _, a := range list {
			if a.seq > seq {
				out[gw] = a.at
				break
			}
		}
	}
	return out
}

type appliedCore struct {
	l    *appliedLog
	part string
}

func (c appliedCore) Enabled(lvl zapcore.Level) bool    { return lvl >= zapcore.InfoLevel }
func (c appliedCore) With([]zapcore.Field) zapcore.Core { return c }
func (c appliedCore) Sync() error                       { return nil }

func (c appliedCore) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == "sync applied" {
		return ce.AddCore(e, c)
	}
	return ce
}

func (c appliedCore) Write(e zapcore.Entry, fields []zapcore.Field) error {
	for _, f := range fields {
		if f.Key == "seq" {
			c.l.mu.Lock()
			if c.l.at == nil {
				c.l.at = make(map[string][]appliedAt)
			}
			c.l.at[c.part] = append(c.l.at[c.part], appliedAt{seq: uint64(f.Integer), at: e.Time})
			c.l.mu.Unlock()
		}
	}
	return nil
}

// persistTotals reads the coordinator's persist histogram: the time of
// all its store updates so far and their number.
func persistTotals(tb testing.TB, s *deployment) (time.Duration, int) {
	resp, err := s.HTTP().Get(s.CoordinatorURL() + "/metrics")
	if err != nil {
		tb.Fatalf("coordinator metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		tb.Fatalf("coordinator metrics: %d", resp.StatusCode)
	}
	const name = "capgate_coordinator_persist_duration_seconds"
	var sum float64
	var n int
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), name+"_sum "); ok {
			sum, _ = strconv.ParseFloat(v, 64)
		}
		if v, ok := strings.CutPrefix(sc.Text(), name+"_count "); ok {
			n, _ = strconv.Atoi(v)
		}
	}
	return time.Duration(sum * float64(time.Second)), n
}

// lastAck is when the coordinator last heard any gateway of gws
// (last_seen; zero if one never polled).
func lastAck(tb testing.TB, gws coordinator.GatewaysResponse) time.Time {
	var last time.Time
	for _, g := range gws.Gateways {
		at, err := time.Parse(time.RFC3339Nano, g.LastSeen)
		if err != nil {
			tb.Fatalf("gateway %s last_seen %q: %v", g.ID, g.LastSeen, err)
		}
		if at.After(last) {
			last = at
		}
	}
	return last
}

// appliedSpread is the earliest and the latest of ats.
func appliedSpread(ats map[string]time.Time) (first, last time.Time) {
	for _, at := range ats {
		if first.IsZero() || at.Before(first) {
			first = at
		}
		if at.After(last) {
			last = at
		}
	}
	return first, last
}
