package timeline

import (
	"slices"
	"sync"
	"time"
)

// Delivery is one record handed to the application by a member's poll.
type Delivery struct {
	At     time.Time
	Offset int64
	Member string
}

// Ownership is one hook call for one partition: Member got it (Held) or
// gave it up (revoked or lost).
type Ownership struct {
	At     time.Time
	Member string
	Held   bool
}

// Timeline is what a run observed, per partition, in the order it
// happened: a value, safe to analyze anywhere.
type Timeline struct {
	Partitions int32
	Deliveries map[int32][]Delivery
	Events     map[int32][]Ownership
	// Acked lists the offsets the broker acknowledged to the producer.
	Acked map[int32][]int64
}

// Recorder collects a run's deliveries, hook calls and acknowledged
// offsets as they happen. Safe for concurrent use.
type Recorder struct {
	mu         sync.Mutex
	deliveries map[int32][]Delivery
	events     map[int32][]Ownership
	acked      map[int32][]int64
	lastEvent  time.Time
}

// NewRecorder is an empty recorder.
func NewRecorder() *Recorder {
	return &Recorder{deliveries: map[int32][]Delivery{}, events: map[int32][]Ownership{}, acked: map[int32][]int64{}}
}

// Deliver records that member was handed partition's record at offset.
func (r *Recorder) Deliver(member string, partition int32, offset int64, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.deliveries[partition] = append(r.deliveries[partition], Delivery{At: at, Offset: offset, Member: member})
}

// Hold records that member got (held) or gave up partitions at at.
func (r *Recorder) Hold(member string, partitions []int32, held bool, at time.Time) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, p := range partitions {
		r.events[p] = append(r.events[p], Ownership{At: at, Member: member, Held: held})
	}
	if len(partitions) > 0 && at.After(r.lastEvent) {
		r.lastEvent = at
	}
}

// Acked records an offset the broker acknowledged.
func (r *Recorder) Acked(partition int32, offset int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.acked[partition] = append(r.acked[partition], offset)
}

// LastChange is when a partition last changed hands (zero: never).
func (r *Recorder) LastChange() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastEvent
}

// Settled reports whether, since `since`, no partition changed hands,
// members hold every one of partitions exactly once and evenly (floor or
// ceil), and every partition was delivered to its holder.
func (r *Recorder) Settled(partitions int32, members []string, since, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.lastEvent.After(since) || len(members) == 0 {
		return false
	}
	counts := map[string]int{}
	for p := range partitions {
		owner := OwnerAt(r.events[p], now)
		if owner == "" || !slices.Contains(members, owner) {
			return false
		}
		counts[owner]++
		ds := r.deliveries[p]
		if len(ds) == 0 || ds[len(ds)-1].Member != owner || ds[len(ds)-1].At.Before(since) {
			return false
		}
	}
	floor := int(partitions) / len(members)
	for _, m := range members {
		if n := counts[m]; n < floor || n > floor+1 {
			return false
		}
	}
	return true
}

// Drained reports whether every acknowledged offset was delivered.
func (r *Recorder) Drained() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for p, offsets := range r.acked {
		if len(offsets) == 0 {
			continue
		}
		last := offsets[len(offsets)-1]
		if !slices.ContainsFunc(r.deliveries[p], func(d Delivery) bool { return d.Offset == last }) {
			return false
		}
	}
	return true
}

// Timeline copies what was recorded so far.
func (r *Recorder) Timeline(partitions int32) Timeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	tl := Timeline{Partitions: partitions, Deliveries: map[int32][]Delivery{}, Events: map[int32][]Ownership{}, Acked: map[int32][]int64{}}
	for p, ds := range r.deliveries {
		tl.Deliveries[p] = slices.Clone(ds)
	}
	for p, evs := range r.events {
		tl.Events[p] = slices.Clone(evs)
	}
	for p, offsets := range r.acked {
		tl.Acked[p] = slices.Clone(offsets)
	}
	return tl
}

// OwnerAt is the member holding the partition at t by the hook calls: the
// latest member granted it and not since released ("" if none).
func OwnerAt(evs []Ownership, t time.Time) string {
	holders := map[string]time.Time{}
	for _, e := range evs {
		if e.At.After(t) {
			break
		}
		if e.Held {
			holders[e.Member] = e.At
		} else {
			delete(holders, e.Member)
		}
	}
	owner, latest := "", time.Time{}
	for m, at := range holders {
		if owner == "" || at.After(latest) || (at.Equal(latest) && m < owner) {
			owner, latest = m, at
		}
	}
	return owner
}
