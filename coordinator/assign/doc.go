// Package assign holds the pure partition assignors of capgate: given the
// members of a group, the partitions they may read and who owns what now,
// each assignor returns a target assignment. No IO, no clock, no global
// state; the same input always gives the same output.
//
// Assignors are plain functions (Func); Lookup maps an assignor name from a
// join request to one. Callers build an Input (members with their resolved
// topic sets, the partitions to place, current owners, admin pins) and
// diff the returned Assignment against the current owners to plan handoffs.
//
// Sticky is the default. It keeps every current owner that is still
// eligible (present and subscribed), honours pins, places unowned
// partitions on the least-loaded eligible members and then moves the fewest
// partitions it can until no partition could move to an eligible member
// with a load at least two lower. With identical subscriptions that is
// floor/ceil balance reached with the minimum number of moves; an
// overloaded member gives up its highest-numbered partitions first. It
// works per class of topics with the same subscribers, in
// roughly O(P log P + (P + moves) · C · log M) for P partitions, M members and C
// classes per member (C is 1 when everyone subscribes alike); 1,000 members
// and 10,000 partitions take a few milliseconds.
//
// Range is Kafka's range assignor, per topic, over the members subscribed
// to that topic sorted by member ID; it ignores current owners but honours
// pins.
//
// Every function is safe for concurrent use: the assignors read their
// Input without modifying it and share no state.
package assign
