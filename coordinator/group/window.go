package group

import "time"

// The join window: an empty group's first assignment waits while joins
// keep coming (Kafka's group.initial.rebalance.delay.ms).
//
// Without it the first member to join an empty group was granted every
// partition at once, and handed nearly all of them back as the others
// arrived: a storm of 1,000 members into 10,000 partitions signed ~20,000
// capabilities, put 7 MB in the first join's answer, and ran ~9,990
// handoffs (revoke, release, fence, grant) before the group was stable
// (BENCHMARKS.md §4). With it the storm is assigned once.
//
// The rule: a join that finds its group with no member opens the window;
// it closes once no new member has joined for its quiet time, and at the
// latest initial_assign_hold_max (30 s) after it opened. The quiet time
// is initial_assign_delay (50 ms), or three times the longest gap
// between two of the window's joins so far — or the longest lag of one
// of them, from the shell receiving it to its step (Join.Arrived) — when
// that is longer, never more than initial_assign_delay_max: a crowd the
// loop takes in batches (a batch's persist under load is longer than 50
// ms), or whose first joins the loaded shell brings in slowly, keeps the
// window open while it keeps coming at its own pace — under load the
// storm's window closed by the 50 ms rule after 14–635 of its 1,000
// members, once after its first alone (its second join came 55 ms
// later), and the rest were rebalances (BENCHMARKS §4). A lone
// consumer's join on a quiet machine has no gap and a lag of a
// millisecond or two: its window closes initial_assign_delay after it.
// And while the shell is working on more joins of the group (past their
// bearer's check: Join.Concurrent, counted as each join is stepped) the
// quiet time is initial_assign_delay_max: they are coming. While it is
// open the group assigns as if it had no member: nothing a member would
// own is granted, and outside leases are served as always. When it
// closes the group is reassigned once. The join that opened it is
// answered then, with its grants — as a first member's join always was,
// so a lone consumer (curl, the SDK, a Kafka client through the
// listener) finds its partitions in the join's answer,
// initial_assign_delay later —, or initial_assign_delay_max (3 s) after
// it opened when the window is still open then (joins still coming), with
// no grants: its client does not wait past its request timeout, and its
// grants go out as news as every other member's. The joins after it are
// answered at once with no grants, as a later member's join always was,
// and theirs go out as news to their held heartbeats. Answering the
// others at once matters: clients that join a few at a time (the
// benchmark's 100 in flight) would otherwise stop joining while the
// window waits for them. A member joining a group that has members never
// waits.
//
// What bounds it: every extension is a new member's join (join_rate,
// members_per_group), and the window never outlasts
// initial_assign_hold_max (with initial_assign_delay_max, whichever is
// longer): a tenant sharing the group that joins and leaves without end
// holds the group's first assignment back that long, once.
//
// A keyed repeat of the parked join (its client gave up and sent it
// again, Idempotency-Key) takes its place: the repeat is the request
// whose answer will be read, so the grants go there; the one it repeats
// is answered at once, without grants.
//
// Safety does not rest on it: it only holds grants back. The window is
// not persisted: a restored machine (a restart, a takeover) assigns
// every group at once, which is what a machine without the window does.

// assignWindow is a group's join window; the zero value is closed.
type assignWindow struct {
	open bool
	// lastJoin is the last new member's join; longestGap the longest
	// time between two of the window's joins so far, or a join's lag
	// (from the shell receiving it to its step) when that is longer
	// (windowQuiet).
	lastJoin   time.Time
	longestGap time.Duration
	// expecting: the shell was working on more joins of the group when
	// it built the last one (Join.Concurrent).
	expecting bool
	// quietUntil: the quiet time after lastJoin, never past closesBy.
	quietUntil time.Time
	answerBy   time.Time // initial_assign_delay_max after it opened: the opener is answered by then
	closesBy   time.Time // initial_assign_hold_max (or _delay_max, the longer) after it opened
	armed      bool      // a timerWindow entry is in the heap, at armedAt
	armedAt    time.Time
	due        bool // its timer fired this step (Machine.windowsDue)
	// opener is the join that opened it, answered when it closes or at
	// answerBy; its member's session counts the wait as contact
	// (parkedOpener).
	opener pendingJoin
}

// quietGaps is how many of its longest gap between joins a window waits
// for the next one (windowQuiet).
const quietGaps = 3

// windowQuiet is how long w waits for another join after its last:
// initial_assign_delay, or quietGaps times the longest gap between two
// of its joins (or a join's lag: the joins sent with the first one take
// as long to reach the machine) when that is longer, at most
// initial_assign_delay_max — which it waits when the shell was working
// on more joins of the group as it stepped the last one.
func (c *Config) windowQuiet(w *assignWindow) time.Duration {
	most := max(c.InitialAssignDelayMax, c.InitialAssignDelay)
	if w.expecting {
		return most
	}
	return min(max(c.InitialAssignDelay, quietGaps*w.longestGap), most)
}

// windowHold is how long a window may stay open in all.
func (c *Config) windowHold() time.Duration {
	return max(c.InitialAssignHoldMax, c.InitialAssignDelayMax, c.InitialAssignDelay)
}

// holding reports whether g's first assignment is held back now.
func (w *assignWindow) holding() bool { return w.open }

// next is when w must be looked at again: its quiet time's end, or its
// opener's answerBy when that comes first.
func (w *assignWindow) next() time.Time {
	if w.opener.member != nil {
		return earliest(w.quietUntil, w.answerBy)
	}
	return w.quietUntil
}

// noteJoin is called for every new member's join e, before it is added
// to g: into an empty group it opens the window (true: the join's answer
// waits for it, parkOpener), into an open one it extends it.
func (m *Machine) noteJoin(g *group, e Join) (opened bool) {
	w := &g.window
	switch {
	case m.cfg.InitialAssignDelay <= 0:
		return false
	case w.open:
		w.longestGap = max(w.longestGap, m.now.Sub(w.lastJoin))
		w.lastJoin = m.now
	case len(g.members) == 0:
		*w = assignWindow{open: true, lastJoin: m.now, answerBy: m.now.Add(m.cfg.InitialAssignDelayMax), closesBy: m.now.Add(m.cfg.windowHold())}
		opened = true
	default:
		return false
	}
	if !e.Arrived.IsZero() {
		w.longestGap = max(w.longestGap, m.now.Sub(e.Arrived))
	}
	w.expecting = e.Concurrent > 0
	w.quietUntil = earliest(m.now.Add(m.cfg.windowQuiet(w)), w.closesBy)
	m.armWindow(g)
	return opened
}

// parkOpener holds the answer of the join that opened g's window.
func (g *group) parkOpener(j pendingJoin) { g.window.opener = j }

// parkedOpener reports whether mem's join answer waits for its group's
// window: its session does not run meanwhile (it has no member token to
// heartbeat with yet).
func (mem *member) parkedOpener() bool { return mem.group.window.opener.member == mem }

// armWindow makes sure a timerWindow entry is due by g's window's next
// deadline. The deadline moves earlier only when a join's quiet time is
// shorter than the last one's (Join.Concurrent gone): an entry is added
// then, and the later one fires for nothing.
func (m *Machine) armWindow(g *group) {
	w := &g.window
	if next := w.next(); !w.armed || next.Before(w.armedAt) {
		w.armed, w.armedAt = true, next
		m.push(timer{at: next, kind: timerWindow, group: g})
	}
}

// onWindowTimer marks g's window due; finish decides it (closeWindows),
// after the step's events.
func (m *Machine) onWindowTimer(g *group, at time.Time) {
	w := &g.window
	if at.Equal(w.armedAt) {
		w.armed = false
	}
	if w.open && !w.due {
		w.due = true
		m.windowsDue = append(m.windowsDue, g)
	}
}

// closeWindows closes each due window whose quiet time is over, else
// waits for its new end, answering its opener (with no grants) once
// answerBy is reached. It runs after the step's events: joins the shell
// queued while the loop was busy (a persist under load can take longer
// than the quiet time) are stepped in the same batch as the timer and
// extend the window, rather than find it closed and each be a
// rebalance. A group forgotten since only has its first join answered.
func (m *Machine) closeWindows() {
	for _, g := range m.windowsDue {
		w := &g.window
		w.due = false
		if !w.open {
			continue
		}
		live := m.groups[g.name] == g
		if live && m.now.Before(w.quietUntil) {
			if w.opener.member != nil && !m.now.Before(w.answerBy) {
				m.answerOpener(w) // joins still coming: it waited initial_assign_delay_max
			}
			m.armWindow(g)
			continue
		}
		m.answerOpener(w)
		*w = assignWindow{}
		if live {
			m.queueReassign(g)
		}
	}
	m.windowsDue = m.windowsDue[:0]
}

// answerOpener answers the join that opened w, if it still waits: after
// the reassignment (finish), with what its member owns then. Its
// member's session starts with the answer.
func (m *Machine) answerOpener(w *assignWindow) {
	opener := w.opener
	w.opener = pendingJoin{}
	if opener.member != nil {
		opener.member.lastContact = m.now
		m.joins = append(m.joins, opener)
	}
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
