package assign

import (
	"encoding/binary"
	"fmt"
	"slices"
)

// classes groups topics with the same subscribers. For Sticky two
// partitions of one class are interchangeable as far as eligibility goes,
// so balance is tracked per class, not per topic: a group where everyone
// subscribes to the same 100 topics has one class.
//
// A slot is one (class, subscriber) pair. Slots of a class are contiguous
// and ordered by member index; each member lists its slots by class.
type classes struct {
	topicClass  []int32   // per topic
	memberSlots [][]int32 // per member: its slots, ascending by class
	slotClass   []int32
	slotMember  []int32
	classSlots  []int32 // class c owns slots classSlots[c] to classSlots[c+1]
}

func newClasses(l *layout) *classes {
	k := &classes{
		topicClass:  make([]int32, len(l.topics)),
		memberSlots: make([][]int32, len(l.memberIDs)),
	}
	byKey := make(map[string]int32)
	var key []byte
	for t, subscribers := range l.subscribers {
		key = key[:0]
		for _, m := range subscribers {
			key = binary.AppendUvarint(key, uint64(m))
		}
		c, seen := byKey[string(key)]
		if !seen {
			c = int32(len(k.classSlots))
			byKey[string(key)] = c
			k.addClass(c, subscribers)
		}
		k.topicClass[t] = c
	}
	k.classSlots = append(k.classSlots, int32(len(k.slotClass)))
	return k
}

func (k *classes) addClass(c int32, subscribers []int32) {
	k.classSlots = append(k.classSlots, int32(len(k.slotClass)))
	for _, m := range subscribers {
		slot := int32(len(k.slotClass))
		k.slotClass = append(k.slotClass, c)
		k.slotMember = append(k.slotMember, m)
		k.memberSlots[m] = append(k.memberSlots[m], slot)
	}
}

func (k *classes) count() int { return len(k.classSlots) - 1 }

// slot returns the slot of member m in class c; m must subscribe to c.
func (k *classes) slot(c, m int32) int32 {
	slot, found := k.slotOf(c, m)
	if !found {
		panic(fmt.Sprintf("assign: member %d has no slot in class %d", m, c))
	}
	return slot
}

// slotOf returns the slot of member m in class c, if m subscribes to c.
func (k *classes) slotOf(c, m int32) (int32, bool) {
	slots := k.memberSlots[m]
	i, found := slices.BinarySearchFunc(slots, c, func(slot, c int32) int {
		return int(k.slotClass[slot] - c)
	})
	if !found {
		return -1, false
	}
	return slots[i], true
}
