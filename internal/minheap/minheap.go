// Package minheap is a binary min-heap on a slice, ordered by a less
// function given once: the coordinator machine's timers and the
// simulation's event queue. Elements that compare equal come out in an
// order fixed by the order they went in, so runs are reproducible.
// Not safe for concurrent use.
package minheap

// Heap is a min-heap of T; the zero value is not usable, call New.
type Heap[T any] struct {
	items []T
	less  func(a, b T) bool
}

// New returns an empty heap ordered by less.
func New[T any](less func(a, b T) bool) Heap[T] {
	return Heap[T]{less: less}
}

// Len is the number of elements.
func (h *Heap[T]) Len() int { return len(h.items) }

// Min is the smallest element; the heap must not be empty.
func (h *Heap[T]) Min() T { return h.items[0] }

// Push adds x.
func (h *Heap[T]) Push(x T) {
	h.items = append(h.items, x)
	s := h.items
	for i := len(s) - 1; i > 0; {
		parent := (i - 1) / 2
		if !h.less(s[i], s[parent]) {
			break
		}
		s[i], s[parent] = s[parent], s[i]
		i = parent
	}
}

// Pop removes and returns the smallest element; the heap must not be
// empty.
func (h *Heap[T]) Pop() T {
	s := h.items
	top := s[0]
	last := len(s) - 1
	s[0] = s[last]
	var zero T
	s[last] = zero
	s = s[:last]
	h.items = s
	for i := 0; ; {
		smallest, left, right := i, 2*i+1, 2*i+2
		if left < len(s) && h.less(s[left], s[smallest]) {
			smallest = left
		}
		if right < len(s) && h.less(s[right], s[smallest]) {
			smallest = right
		}
		if smallest == i {
			return top
		}
		s[i], s[smallest] = s[smallest], s[i]
		i = smallest
	}
}
