package assign

import (
	"fmt"
	"slices"
)

// Sticky keeps current owners and moves the fewest partitions needed to
// reach balance: no partition (other than a pinned one) could move to an
// eligible member whose load is at least two lower.
//
//  1. A partition pinned to a present, subscribed member goes to it and
//     counts toward its load; pinned partitions never move otherwise.
//  2. Every other partition whose current owner is present and subscribed
//     stays with it for now.
//  3. Unowned partitions go, one by one, to the least-loaded eligible
//     member (ties: lowest member ID); partitions of topics with fewer
//     subscribers are placed first.
//  4. While an improving move exists, take the class of topics (topics with
//     the same subscribers) with the widest load gap: its most loaded
//     holder gives one partition to its least loaded subscriber. A holder
//     gives first what it did not own before this call (free moves), then
//     its highest-numbered partitions. Ties go to the lowest member ID.
//  5. Any moved partition that can go back to its original owner without
//     breaking balance goes back.
//
// With identical subscriptions the result is floor/ceil balanced and moves
// the minimum number of partitions: when 3 members own 4 of 12 partitions
// each and a fourth joins, each gives it exactly one. With mixed
// subscriptions the move count is not proven minimal, but no single move
// can be undone without breaking balance.
func Sticky(in Input) Assignment {
	if len(in.Members) == 0 {
		return Assignment{}
	}
	s := newSticky(newLayout(in))
	unowned := s.keep(in)
	s.buildHeaps()
	s.placeUnowned(unowned)
	s.buildGaps()
	s.balance()
	s.restore()
	return s.assignment()
}

// sticky is the working state of one Sticky call. Balance is tracked per
// class (topics with the same subscribers): in each class, receivers
// orders the subscribers least loaded first and donors orders those
// holding movable partitions most loaded first, so the widest gap between
// them tells whether an improving move exists.
type sticky struct {
	*layout
	*classes
	load     []int32 // per member, pinned partitions included
	owner    []int32 // per partition, -1 while unowned
	original []int32 // per partition: its eligible current owner (-1 if none or pinned)
	// Movable partitions held, per slot: free ones are away from their
	// original owner (moving them again costs nothing), kept ones are on it,
	// ascending so the highest-numbered is given first.
	free, kept [][]int32
	receivers  []indexedHeap // per class, over its slots
	donors     []indexedHeap // per class, over its slots holding movable partitions
	gaps       indexedHeap   // over classes, widest gap first
	gap        []int32       // per class: top donor load − top receiver load, -1 with no donor
}

func newSticky(l *layout) *sticky {
	k := newClasses(l)
	slots := len(k.slotClass)
	return &sticky{
		layout:   l,
		classes:  k,
		load:     make([]int32, len(l.memberIDs)),
		owner:    make([]int32, len(l.partitions)),
		original: make([]int32, len(l.partitions)),
		free:     make([][]int32, slots),
		kept:     make([][]int32, slots),
	}
}

// keep applies pins and keeps eligible current owners; it returns the
// partitions left without an owner, ascending. A pinned partition gets no
// original owner: it never moves again, so it is never given back.
func (s *sticky) keep(in Input) []int32 {
	var unowned []int32
	for i, partition := range s.partitions {
		p := int32(i)
		s.original[p] = -1
		if m, ok := s.validPin(in.Pins, partition); ok {
			s.owner[p] = m
			s.load[m]++
			continue
		}
		if id, owned := in.Current[partition]; owned {
			if m, ok := s.eligible(id, partition.Topic); ok {
				s.original[p] = m
			}
		}
		holder := s.original[p]
		s.owner[p] = holder
		if holder < 0 {
			unowned = append(unowned, p)
			continue
		}
		s.load[holder]++
		slot := s.slot(s.classOf(p), holder)
		s.kept[slot] = append(s.kept[slot], p)
	}
	return unowned
}

func (s *sticky) classOf(p int32) int32 { return s.topicClass[s.partitionTopic[p]] }

func (s *sticky) buildHeaps() {
	receiverPos := make([]int32, len(s.slotClass))
	donorPos := make([]int32, len(s.slotClass))
	s.receivers = make([]indexedHeap, s.count())
	s.donors = make([]indexedHeap, s.count())
	for c := range s.count() {
		s.receivers[c] = indexedHeap{pos: receiverPos, before: s.lessLoaded}
		s.donors[c] = indexedHeap{pos: donorPos, before: s.moreLoaded}
		for slot := s.classSlots[c]; slot < s.classSlots[c+1]; slot++ {
			donorPos[slot] = -1
			s.receivers[c].push(slot)
			if s.holds(slot) {
				s.donors[c].push(slot)
			}
		}
	}
}

func (s *sticky) buildGaps() {
	s.gap = make([]int32, s.count())
	s.gaps = indexedHeap{pos: make([]int32, s.count()), before: s.widerGap}
	for c := range int32(s.count()) {
		s.gap[c] = s.classGap(c)
		s.gaps.push(c)
	}
}

func (s *sticky) lessLoaded(a, b int32) bool {
	ma, mb := s.slotMember[a], s.slotMember[b]
	if s.load[ma] != s.load[mb] {
		return s.load[ma] < s.load[mb]
	}
	return ma < mb
}

func (s *sticky) moreLoaded(a, b int32) bool {
	ma, mb := s.slotMember[a], s.slotMember[b]
	if s.load[ma] != s.load[mb] {
		return s.load[ma] > s.load[mb]
	}
	return ma < mb
}

func (s *sticky) widerGap(a, b int32) bool {
	if s.gap[a] != s.gap[b] {
		return s.gap[a] > s.gap[b]
	}
	return a < b
}

func (s *sticky) holds(slot int32) bool { return len(s.free[slot])+len(s.kept[slot]) > 0 }

func (s *sticky) classGap(c int32) int32 {
	if s.donors[c].len() == 0 {
		return -1
	}
	donor := s.slotMember[s.donors[c].top()]
	receiver := s.slotMember[s.receivers[c].top()]
	return s.load[donor] - s.load[receiver]
}

// placeUnowned gives each unowned partition to the least-loaded eligible
// member, most constrained topics (fewest subscribers) first.
func (s *sticky) placeUnowned(unowned []int32) {
	slices.SortStableFunc(unowned, func(p, q int32) int {
		return s.classSize(s.classOf(p)) - s.classSize(s.classOf(q))
	})
	for _, p := range unowned {
		c := s.classOf(p)
		s.receive(p, c, s.receivers[c].top())
	}
}

func (s *sticky) classSize(c int32) int { return int(s.classSlots[c+1] - s.classSlots[c]) }

// balance makes improving moves, widest gap first, until none is left.
// Each move lowers the sum of squared loads by at least 2, so it ends.
func (s *sticky) balance() {
	for s.gaps.len() > 0 {
		c := s.gaps.top()
		if s.gap[c] < 2 {
			return
		}
		s.move(c)
	}
}

// move hands one partition from the most loaded holder of class c to its
// least loaded subscriber.
func (s *sticky) move(c int32) {
	donor, receiver := s.donors[c].top(), s.receivers[c].top()
	from := s.slotMember[donor]
	if s.load[from] < s.load[s.slotMember[receiver]]+2 {
		panic(fmt.Sprintf("assign: move in class %d from member %d (load %d) to member %d (load %d) does not improve balance",
			c, from, s.load[from], s.slotMember[receiver], s.load[s.slotMember[receiver]]))
	}
	var p int32
	if n := len(s.free[donor]); n > 0 {
		p, s.free[donor] = s.free[donor][n-1], s.free[donor][:n-1]
	} else {
		n := len(s.kept[donor])
		p, s.kept[donor] = s.kept[donor][n-1], s.kept[donor][:n-1]
	}
	s.release(c, donor)
	s.receive(p, c, receiver)
}

// release accounts for a partition of class c just taken from slot.
func (s *sticky) release(c, slot int32) {
	if !s.holds(slot) {
		s.donors[c].remove(slot)
	}
	s.addLoad(s.slotMember[slot], -1)
}

// receive makes the member of slot the holder of movable partition p.
func (s *sticky) receive(p, c, slot int32) {
	m := s.slotMember[slot]
	s.owner[p] = m
	if s.original[p] == m {
		i, _ := slices.BinarySearch(s.kept[slot], p)
		s.kept[slot] = slices.Insert(s.kept[slot], i, p)
	} else {
		s.free[slot] = append(s.free[slot], p)
	}
	if !s.donors[c].contains(slot) {
		s.donors[c].push(slot)
	}
	s.addLoad(m, 1)
}

// addLoad changes member m's load and restores every heap it sits in.
func (s *sticky) addLoad(m, delta int32) {
	s.load[m] += delta
	for _, slot := range s.memberSlots[m] {
		c := s.slotClass[slot]
		s.receivers[c].fix(slot)
		if s.donors[c].contains(slot) {
			s.donors[c].fix(slot)
		}
		if s.gap != nil {
			s.gap[c] = s.classGap(c)
			s.gaps.fix(c)
		}
	}
}

func (s *sticky) assignment() Assignment {
	out := make(Assignment, len(s.partitions))
	for p, partition := range s.partitions {
		out[partition] = s.memberIDs[s.owner[p]]
	}
	return out
}
