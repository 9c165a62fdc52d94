package sim

import (
	"fmt"
	"strconv"
)

// eventKind names what an event is, for the trace.
type eventKind uint8

const (
	evDeliver        eventKind = iota // a network message arrives
	evCoordFlush                      // the coordinator loop steps what it gathered
	evCoordTick                       // the coordinator's timer
	evCoordCrash                      // the coordinator dies
	evCoordRestart                    // the coordinator restarts from its store
	evGatewayCrash                    // a gateway dies
	evGatewayRestart                  // a gateway restarts with an empty view
	evGatewayPoll                     // a gateway's sync poll after a backoff
	evBroker                          // a broker answers a fetch
	evTimeout                         // a request's deadline passes
	evProduce                         // the producer appends records
	evConsumer                        // a consumer's own step (tick, poll, commit, hook, retry)
	evChurn                           // a membership change
	evCut                             // a network partition starts
	evDrainCheck                      // the drain phase checks for idleness
	evGrow                            // a topic grows
	evAdmin                           // an admin request
	evReplica                         // a replica's leadership step, pause or resume
	evGatewayStuck                    // a gateway stops applying sync answers for a while
	evRogue                           // a sync-token holder polls without acknowledging
	eventKinds
)

var kindNames = [eventKinds]string{
	"deliver", "coord-flush", "coord-tick", "coord-crash", "coord-restart", "gw-crash", "gw-restart",
	"gw-poll", "broker", "timeout", "produce", "consumer", "churn", "cut", "drain-check", "grow", "admin", "replica",
	"gw-stuck", "rogue",
}

func (k eventKind) String() string {
	if k < eventKinds {
		return kindNames[k]
	}
	return "kind(" + strconv.Itoa(int(k)) + ")"
}

// tracer hashes every event (time, kind, node) and what the parts choose
// to add, so two runs of one seed can be compared by one number; with a
// printer it also prints each event.
type tracer struct {
	hash  uint64 // FNV-1a
	print func(string)
}

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func (t *tracer) init(print func(string)) {
	t.hash = fnvOffset
	t.print = print
}

// event adds one event to the hash (and prints it when tracing).
func (t *tracer) event(w *World, ev event) {
	t.mix(uint64(ev.at))
	t.mix(uint64(ev.kind)<<32 | uint64(uint32(ev.node)))
	if t.print != nil {
		t.print(fmt.Sprintf("#%d %s %s %s", w.index, ev.at, ev.kind, w.nodeName(int(ev.node))))
	}
}

// mix adds a value a part observed (an epoch, an offset) to the hash:
// FNV-1a over the whole word at once, then its high bits folded down
// (the hash only tells runs apart; byte by byte it was 1 % of the CPU).
func (t *tracer) mix(v uint64) {
	h := (t.hash ^ v) * fnvPrime
	t.hash = h ^ h>>29
}

// nodeName names a node for the trace.
func (w *World) nodeName(n int) string {
	switch {
	case n < 0:
		return "world"
	case n == coordNode && len(w.coords) > 1:
		return replicaID(0)
	case n == coordNode:
		return "coordinator"
	case n <= len(w.gateways):
		return gatewayID(n - 1)
	case n < w.adminNode():
		return w.consumers[n-1-len(w.gateways)].name
	case n > w.adminNode():
		return replicaID(n - w.adminNode())
	}
	return "admin"
}

// line prints a detail line when tracing.
func (t *tracer) line(w *World, s string) {
	if t.print != nil {
		t.print("    " + s)
	}
}

// tracing reports whether events are printed; guard costly tracef
// arguments with it.
func (w *World) tracing() bool { return w.trace.print != nil }

// tracef prints a detail line when tracing; the formatting only runs then.
func (w *World) tracef(format string, args ...any) {
	if w.trace.print != nil {
		w.trace.print("    " + fmt.Sprintf(format, args...))
	}
}

func (t *tracer) sum() uint64 { return t.hash }
