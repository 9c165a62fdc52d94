package sim

import "time"

// Node numbers: the coordinator is 0, gateways follow, then consumers.
const coordNode = 0

func (w *World) gatewayNode(i int) int  { return 1 + i }
func (w *World) consumerNode(i int) int { return 1 + len(w.gateways) + i }
func (w *World) adminNode() int         { return 1 + len(w.gateways) + len(w.consumers) }

// network carries every message between parts. A message is dropped,
// delayed (which reorders it against others), duplicated (only requests
// a real transport could send twice: GETs and retried idempotent calls)
// or cut off by a partition, at the seed's rates. It never corrupts.
type network struct {
	w        *World
	isolated map[int]time.Duration    // node → cut off from everyone until
	links    map[[2]int]time.Duration // node pair (low, high) → cut until
	// cutUntil is the latest end of any cut: past it nothing is cut, and
	// cut answers without looking at the maps (it runs twice a message).
	cutUntil time.Duration
}

func newNetwork(w *World) *network {
	return &network{w: w, isolated: map[int]time.Duration{}, links: map[[2]int]time.Duration{}}
}

// call is the sender's side of a request: the deadline by which it
// stops waiting for the answer, and what it does then. The network runs
// timeout at the deadline whenever it loses the request or its answer (or
// the answer would come too late); a sender that got its answer ignores
// the timeout.
type call struct {
	deadline time.Duration
	timeout  func()
	// retried: the sender retries the request with the same content
	// when it gives up (a keyed join, a commit, a leave), so the network
	// may stall it past the deadline (netFaults.stall).
	retried bool
}

// request sends a request from → to; dupable marks one the transport may
// deliver twice (GETs, requests the client retries).
func (n *network) request(from, to int, dupable bool, c call, deliver func()) {
	n.transmit(from, to, c, false, deliver)
	if dupable && !n.w.healed && n.w.chance(n.w.prof.net.dup) {
		n.transmit(from, to, c, false, deliver)
	}
}

// answer sends the answer of a request made with c back to its sender.
func (n *network) answer(from, to int, c call, deliver func()) {
	n.transmit(from, to, c, true, deliver)
}

func (n *network) transmit(from, to int, c call, answer bool, deliver func()) {
	w := n.w
	if n.cut(from, to) || (!w.healed && w.chance(w.prof.net.drop)) {
		n.lost(from, c)
		return
	}
	at := w.now + n.latency()
	if !answer && c.retried && c.timeout != nil && !w.healed && w.chance(w.prof.net.stall) {
		// Held past the deadline: the sender gives up at it and retries
		// (the same key, the same offsets), and this one lands later,
		// its answer to nobody.
		w.stats.Stalled++
		n.lost(from, c)
		at = max(at, c.deadline+w.between(time.Millisecond, w.prof.net.stallMax))
	}
	if answer && c.timeout != nil && at > c.deadline {
		n.lost(from, c) // the sender gave up first
		return
	}
	w.at(at, evDeliver, to, func() {
		if n.cut(from, to) {
			n.lost(from, c)
			return
		}
		deliver()
	})
}

// lost makes the sender of a lost message time out.
func (n *network) lost(from int, c call) {
	if c.timeout != nil {
		n.w.at(c.deadline, evTimeout, from, c.timeout)
	}
}

// latency draws one message's transit time: a base, plus now and then a
// long delay that reorders it behind later messages.
func (n *network) latency() time.Duration {
	w := n.w
	d := w.between(20*time.Microsecond, w.prof.net.latencyMax)
	if !w.healed && w.chance(w.prof.net.delay) {
		d += w.between(0, w.prof.net.delayMax)
	}
	return d
}

// cut reports whether a partition separates a and b now.
func (n *network) cut(a, b int) bool {
	now := n.w.now
	if now >= n.cutUntil {
		return false
	}
	if n.isolated[a] > now || n.isolated[b] > now {
		return true
	}
	return n.links[linkKey(a, b)] > now
}

func linkKey(a, b int) [2]int {
	if a > b {
		a, b = b, a
	}
	return [2]int{a, b}
}

// isolate cuts node off from everyone for d.
func (n *network) isolate(node int, d time.Duration) {
	n.isolated[node] = max(n.isolated[node], n.w.now+d)
	n.cutUntil = max(n.cutUntil, n.w.now+d)
}

// cutLink cuts the link between a and b for d.
func (n *network) cutLink(a, b int, d time.Duration) {
	k := linkKey(a, b)
	n.links[k] = max(n.links[k], n.w.now+d)
	n.cutUntil = max(n.cutUntil, n.w.now+d)
}

// healAll ends every partition.
func (n *network) healAll() {
	clear(n.isolated)
	clear(n.links)
	n.cutUntil = 0
}
