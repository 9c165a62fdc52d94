package assign

import "slices"

// restore gives moved partitions back to their original owner wherever
// that keeps the balance. With mixed subscriptions, widest-gap-first
// balancing can move a partition off a member that later sheds others
// anyway; restore undoes such moves, one at a time, until every remaining
// move is needed. Each undo saves one move, so it ends.
func (s *sticky) restore() {
	var moved []int32
	for p, owner := range s.owner {
		if original := s.original[p]; original >= 0 && original != owner {
			moved = append(moved, int32(p))
		}
	}
	for changed := true; changed; {
		changed = false
		remaining := moved[:0]
		for _, p := range moved {
			if !s.canRestore(p) {
				remaining = append(remaining, p)
				continue
			}
			s.giveBack(p)
			changed = true
		}
		moved = remaining
	}
}

// canRestore reports whether moving p back from its holder to its original
// owner leaves no improving move. The state is balanced before, so only
// the original owner (one more) as a holder and the current holder (one
// less) as a receiver can take part in a new improving move.
func (s *sticky) canRestore(p int32) bool {
	c := s.classOf(p)
	to, from := s.original[p], s.owner[p]
	loadTo, loadFrom := s.load[to]+1, s.load[from]-1
	for _, slot := range s.memberSlots[to] {
		k := s.slotClass[slot]
		if k != c && !s.holds(slot) {
			continue
		}
		lowest := s.load[s.slotMember[s.receivers[k].top()]]
		if _, subscribed := s.slotOf(k, from); subscribed {
			lowest = min(lowest, loadFrom)
		}
		if loadTo > lowest+1 {
			return false
		}
	}
	for _, slot := range s.memberSlots[from] {
		k := s.slotClass[slot]
		highest := int32(-1)
		if s.donors[k].len() > 0 {
			highest = s.load[s.slotMember[s.donors[k].top()]]
		}
		if toSlot, subscribed := s.slotOf(k, to); subscribed && (k == c || s.holds(toSlot)) {
			highest = max(highest, loadTo)
		}
		if highest > loadFrom+1 {
			return false
		}
	}
	return true
}

// giveBack moves p from its holder back to its original owner.
func (s *sticky) giveBack(p int32) {
	c := s.classOf(p)
	slot := s.slot(c, s.owner[p])
	i := slices.Index(s.free[slot], p)
	s.free[slot] = slices.Delete(s.free[slot], i, i+1)
	s.release(c, slot)
	s.receive(p, c, s.slot(c, s.original[p]))
}
