package timeline

import (
	"errors"
	"sync"
)

// ErrTooManySubscribers refuses a subscriber beyond the configured bound.
var ErrTooManySubscribers = errors.New("timeline: too many subscribers")

// Feed is the ring of recent events and its subscribers. The zero value is
// not usable; call New.
type Feed struct {
	mu      sync.Mutex
	ring    []Event // ring[id % len(ring)] holds event id
	next    uint64  // id of the next event; ids start at 1
	subs    map[*Subscription]struct{}
	maxSubs int

	derive deriver // owned by the Observe goroutine
}

// New returns a feed keeping the last size events, with at most
// maxSubscribers subscribers at once.
func New(size, maxSubscribers int) *Feed {
	if size < 1 || maxSubscribers < 0 {
		panic("timeline: size must be >= 1 and maxSubscribers >= 0")
	}
	return &Feed{
		ring: make([]Event, size), next: 1,
		subs: make(map[*Subscription]struct{}), maxSubs: maxSubscribers,
		derive: newDeriver(),
	}
}

// publish appends events under one lock, numbering them, and pokes every
// subscriber without waiting for any.
func (f *Feed) publish(events []Event) {
	if len(events) == 0 {
		return
	}
	f.mu.Lock()
	for i := range events {
		events[i].ID = f.next
		f.ring[f.next%uint64(len(f.ring))] = events[i]
		f.next++
	}
	for s := range f.subs {
		select {
		case s.notify <- struct{}{}:
		default: // already poked; it reads everything new when it wakes
		}
	}
	f.mu.Unlock()
}

// oldestLocked is the id of the oldest event still in the ring.
func (f *Feed) oldestLocked() uint64 {
	if n := uint64(len(f.ring)); f.next > n {
		return f.next - n
	}
	return 1
}

// Last is the id of the newest event, 0 when there is none.
func (f *Feed) Last() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.next - 1
}

// Recent returns up to n of the newest events, oldest first, keeping only
// those match accepts (nil accepts all).
func (f *Feed) Recent(n int, match func(*Event) bool) []Event {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []Event
	for id := f.next - 1; id >= f.oldestLocked() && id > 0 && len(out) < n; id-- {
		e := &f.ring[id%uint64(len(f.ring))]
		if match == nil || match(e) {
			out = append(out, *e)
		}
	}
	for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
		out[i], out[j] = out[j], out[i]
	}
	return out
}

// Subscribe starts reading at the event after id after: 0 reads from the
// oldest event kept, Last() only what comes next. It fails with
// ErrTooManySubscribers at the bound.
func (f *Feed) Subscribe(after uint64) (*Subscription, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.subs) >= f.maxSubs {
		return nil, ErrTooManySubscribers
	}
	s := &Subscription{feed: f, notify: make(chan struct{}, 1), next: after + 1}
	f.subs[s] = struct{}{}
	if s.next < f.next {
		s.notify <- struct{}{}
	}
	return s, nil
}

// Subscribers is how many subscriptions are open.
func (f *Feed) Subscribers() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.subs)
}

// Subscription reads the feed in order from one point on. Its methods are
// for one reader goroutine.
type Subscription struct {
	feed   *Feed
	notify chan struct{}
	next   uint64
}

// Ready is poked when events newer than the last read exist.
func (s *Subscription) Ready() <-chan struct{} { return s.notify }

// Read appends up to max unread events to dst and returns it. Lagged is
// true when events were dropped from the ring before this subscriber read
// them: it resumes at the oldest event kept.
func (s *Subscription) Read(dst []Event, max int) (events []Event, lagged bool) {
	f := s.feed
	f.mu.Lock()
	defer f.mu.Unlock()
	if oldest := f.oldestLocked(); s.next < oldest {
		s.next, lagged = oldest, true
	}
	for ; s.next < f.next && max > 0; s.next, max = s.next+1, max-1 {
		dst = append(dst, f.ring[s.next%uint64(len(f.ring))])
	}
	if s.next < f.next {
		select { // more to read: stay ready
		case s.notify <- struct{}{}:
		default:
		}
	}
	return dst, lagged
}

// Close ends the subscription, freeing its place.
func (s *Subscription) Close() {
	s.feed.mu.Lock()
	delete(s.feed.subs, s)
	s.feed.mu.Unlock()
}
