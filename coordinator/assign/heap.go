package assign

// indexedHeap is a binary heap of small integer items that knows where each
// item sits, so an item whose key changed can be fixed in O(log n). Several
// heaps may share one position slice when their items are disjoint.
type indexedHeap struct {
	items  []int32
	pos    []int32 // pos[item] is the item's index in items, or -1
	before func(a, b int32) bool
}

func (h *indexedHeap) len() int { return len(h.items) }

func (h *indexedHeap) top() int32 { return h.items[0] }

func (h *indexedHeap) contains(item int32) bool { return h.pos[item] >= 0 }

func (h *indexedHeap) push(item int32) {
	h.pos[item] = int32(len(h.items))
	h.items = append(h.items, item)
	h.up(len(h.items) - 1)
}

func (h *indexedHeap) remove(item int32) {
	i := int(h.pos[item])
	last := len(h.items) - 1
	if i != last {
		h.swap(i, last)
	}
	h.items = h.items[:last]
	h.pos[item] = -1
	if i != last {
		h.fixAt(i)
	}
}

// fix restores the heap order after item's key changed.
func (h *indexedHeap) fix(item int32) { h.fixAt(int(h.pos[item])) }

func (h *indexedHeap) fixAt(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h *indexedHeap) up(i int) {
	for i > 0 {
		parent := (i - 1) / 2
		if !h.before(h.items[i], h.items[parent]) {
			return
		}
		h.swap(i, parent)
		i = parent
	}
}

// down sifts the item at i towards the leaves and reports whether it moved.
func (h *indexedHeap) down(i int) bool {
	start := i
	n := len(h.items)
	for {
		child := 2*i + 1
		if child >= n {
			break
		}
		if right := child + 1; right < n && h.before(h.items[right], h.items[child]) {
			child = right
		}
		if !h.before(h.items[child], h.items[i]) {
			break
		}
		h.swap(i, child)
		i = child
	}
	return i != start
}

func (h *indexedHeap) swap(i, j int) {
	h.items[i], h.items[j] = h.items[j], h.items[i]
	h.pos[h.items[i]] = int32(i)
	h.pos[h.items[j]] = int32(j)
}
