package coordinator

import "testing"

// TestJoinsInFlightCountsEachJoinOnce: a join counts among its group's
// joins on their way until its event is built or its handler returns,
// whichever comes first (the uncount runs once however often it is
// called: the loop calls it when it builds the event, the handler's defer
// after the answer), and a group's entry goes with its last join — the
// map holds only groups with a join on its way. A second uncount taking
// another join off would make a window close on a crowd still coming.
func TestJoinsInFlightCountsEachJoinOnce(t *testing.T) {
	var j joinsInFlight
	a, b := j.enter("g"), j.enter("g")
	other := j.enter("h")
	if n := j.count("g"); n != 2 {
		t.Fatalf("count %d, want 2", n)
	}
	a()
	a() // the handler's defer after the loop built the event
	if n := j.count("g"); n != 1 {
		t.Fatalf("count after one join's event was built (its uncount called twice) %d, want 1", n)
	}
	b()
	other()
	if len(j.n) != 0 {
		t.Fatalf("groups kept with no join on their way: %v", j.n)
	}
}
