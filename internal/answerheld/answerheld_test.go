package answerheld

import (
	"io"
	"testing"
)

// TestForcedAnswersCountForLaterTakes: an answer that must be sent is
// counted past the cap, later Takes of its holder are refused until it
// is given back, and a Body gives its bytes back once, when closed.
func TestForcedAnswersCountForLaterTakes(t *testing.T) {
	c := New(100, 50)
	c.Force("a", 80)
	if why := c.Take("a", 1); why != OverHolder {
		t.Fatalf("a's take with 80 forced of 50: %v, want OverHolder", why)
	}
	if why := c.Take("b", 30); why != OverAll {
		t.Fatalf("b's take with 80 of 100 held: %v, want OverAll", why)
	}
	body := NewBody(c, "b", make([]byte, 10))
	c.Force("b", 10)
	if got, _ := io.ReadAll(body); len(got) != 10 {
		t.Fatalf("body read %d bytes, want 10", len(got))
	}
	body.Close()
	c.Give("a", 80)
	if c.Held() != 0 || c.Holders() != 0 {
		t.Fatalf("after giving back: %d bytes, %d holders held", c.Held(), c.Holders())
	}
}
