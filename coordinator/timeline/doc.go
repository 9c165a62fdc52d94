// Package timeline is the coordinator's feed of handoff events for the
// operator's console: joins, fences, gateway acks, commits, releases,
// grants (with the pause of each move) and admin actions, derived from what
// the state machine already emits.
//
// The coordinator's event loop calls Feed.Observe once per Ready, after the
// Ready was persisted and its messages delivered, so the feed never shows
// something that did not happen. Observe diffs each PartitionRecord
// against the last one it saw for that partition, reads the gateways'
// acknowledged sync sequence from the machine while fences are waiting for
// acks, and appends the events to a bounded ring.
//
// Readers Subscribe and read from the ring at their own pace. Publishing
// never blocks: a subscriber is only poked through a channel of capacity
// one, and one that falls more than the ring's size behind is told it
// lagged and resumes at the oldest event kept. Subscribers are bounded.
//
// Observe must be called from one goroutine (the loop); everything else is
// safe for concurrent use.
package timeline
