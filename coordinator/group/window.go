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
// it closes initial_assign_delay after the last new member joined, and
// at the latest initial_assign_delay_max after it opened. While it is
// open the group assigns as if it had no member: nothing a member would
// own is granted, and outside leases are served as always. When it
// closes the group is reassigned once. The join that opened it is
// answered then, with its grants — as a first member's join always was,
// so a lone consumer (curl, the SDK, a Kafka client through the
// listener) finds its partitions in the join's answer,
// initial_assign_delay later; the joins after it are answered at once with no grants,
// as a later member's join always was, and theirs go out as news to
// their held heartbeats. Answering the others at once matters: clients
// that join a few at a time (the benchmark's 100 in flight) would
// otherwise stop joining while the window waits for them. A member
// joining a group that has members never waits.
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
	// quietUntil: initial_assign_delay after the last new member joined,
	// never past closesBy.
	quietUntil time.Time
	closesBy   time.Time // initial_assign_delay_max after it opened
	armed      bool      // a timerWindow entry is in the heap
	due        bool      // its timer fired this step (Machine.windowsDue)
	// opener is the join that opened it, answered when it closes; its
	// member's session counts the wait as contact (parkedOpener).
	opener pendingJoin
}

// holding reports whether g's first assignment is held back now.
func (w *assignWindow) holding() bool { return w.open }

// noteJoin is called for every new member, before it is added to g: into
// an empty group it opens the window (true: the join's answer waits for
// it, parkOpener), into an open one it extends it.
func (m *Machine) noteJoin(g *group) (opened bool) {
	delay := m.cfg.InitialAssignDelay
	w := &g.window
	switch {
	case delay <= 0:
		return false
	case w.open:
		w.quietUntil = earliest(m.now.Add(delay), w.closesBy)
	case len(g.members) == 0:
		*w = assignWindow{open: true, quietUntil: m.now.Add(delay), closesBy: m.now.Add(m.cfg.InitialAssignDelayMax)}
		w.quietUntil = earliest(w.quietUntil, w.closesBy)
		opened = true
	default:
		return false
	}
	m.armWindow(g)
	return opened
}

// parkOpener holds the answer of the join that opened g's window.
func (g *group) parkOpener(j pendingJoin) { g.window.opener = j }

// parkedOpener reports whether mem's join answer waits for its group's
// window: its session does not run meanwhile (it has no member token to
// heartbeat with yet).
func (mem *member) parkedOpener() bool { return mem.group.window.opener.member == mem }

func (m *Machine) armWindow(g *group) {
	if !g.window.armed {
		g.window.armed = true
		m.push(timer{at: g.window.quietUntil, kind: timerWindow, group: g})
	}
}

// onWindowTimer marks g's window due; finish decides it (closeWindows),
// after the step's events.
func (m *Machine) onWindowTimer(g *group) {
	w := &g.window
	w.armed = false
	if w.open && !w.due {
		w.due = true
		m.windowsDue = append(m.windowsDue, g)
	}
}

// closeWindows closes each due window whose quiet time is over, else
// waits for its new end. It runs after the step's events: joins the
// shell queued while the loop was busy (a persist under load can take
// longer than initial_assign_delay) are stepped in the same batch as the
// timer and extend the window, rather than find it closed and each be a
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
			m.armWindow(g)
			continue
		}
		opener := w.opener
		*w = assignWindow{}
		if opener.member != nil {
			opener.member.lastContact = m.now // its session starts with the answer
			m.joins = append(m.joins, opener) // answered after the reassignment (finish)
		}
		if live {
			m.queueReassign(g)
		}
	}
	m.windowsDue = m.windowsDue[:0]
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}
