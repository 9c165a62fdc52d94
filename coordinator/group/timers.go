package group

import (
	"time"

	"github.com/capgate/capgate/internal/minheap"
)

// timerKind says what a timer entry is for. Entries are never removed
// early: when one fires, its handler re-checks the state and ignores it or
// re-arms it if the deadline moved (members and gateways keep at most one
// entry per kind armed, so the heap stays bounded by live objects plus
// in-flight handoffs, leases and deny entries).
type timerKind uint8

const (
	timerSession   timerKind = iota // member: session expiry
	timerHeartbeat                  // member: held heartbeat wait ends
	timerSyncWait                   // gateway: held poll wait ends
	timerSilence                    // gateway: becomes silent
	timerHandoff                    // partition: handoff timeout or holder expiry
	timerLease                      // partition: lease ends
	timerMoves                      // group: next creeping move
	timerPrune                      // deny entry, revoked member or QoS override expires
	timerSweep                      // look for groups to reap (reap.go)
	timerLag                        // the oldest waiting fence ages past gateway_timeout (lag.go)
	timerWindow                     // group: its join window may close (window.go)
)

// pruneKind says which table a timerPrune entry prunes.
type pruneKind uint8

const (
	pruneRevocations pruneKind = iota // lapsed denied ids and revoked members
	pruneQoS
)

type timer struct {
	at        time.Time
	kind      timerKind
	prune     pruneKind
	member    *member
	gateway   *gateway
	partition *partition
	group     *group
	key       string
}

// timerHeap is a binary min-heap on at.
type timerHeap = minheap.Heap[timer]

func newTimerHeap() timerHeap {
	return minheap.New(func(a, b timer) bool { return a.at.Before(b.at) })
}

// runTimers fires every timer due at m.now.
func (m *Machine) runTimers() {
	for m.timers.Len() > 0 && !m.timers.Min().at.After(m.now) {
		t := m.timers.Pop()
		switch t.kind {
		case timerSession:
			m.onSessionTimer(t.member)
		case timerHeartbeat:
			m.onHeartbeatTimer(t.member)
		case timerSyncWait:
			m.onSyncWaitTimer(t.gateway)
		case timerSilence:
			m.onSilenceTimer(t.gateway)
		case timerHandoff:
			m.tryComplete(t.partition)
		case timerLease:
			m.onLeaseTimer(t.partition)
		case timerMoves:
			t.group.moveArmed = false
			m.startPendingMoves(t.group)
		case timerPrune:
			m.onPruneTimer(t)
		case timerSweep:
			m.onSweepTimer()
		case timerLag:
			m.onLagTimer(t.at)
		case timerWindow:
			m.onWindowTimer(t.group, t.at)
		}
	}
}

// NextDeadline returns when the machine next needs a Tick, if ever. It may
// be early (a timer that turns out to have nothing to do); it is never late.
func (m *Machine) NextDeadline() (time.Time, bool) {
	if m.timers.Len() == 0 {
		return time.Time{}, false
	}
	return m.timers.Min().at, true
}
