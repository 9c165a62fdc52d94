package bench

import (
	"testing"
	"time"
)

func TestOpenLoopCountsFailures(t *testing.T) {
	r := openLoop(2000, 20*time.Millisecond, 8, func(i int) error {
		if i%2 == 1 {
			return errFake
		}
		return nil
	})
	if r.Sent == 0 || r.Failed == 0 || r.Failed > r.Sent || r.FirstFail != errFake || r.Achieved <= 0 {
		t.Errorf("sent %d failed %d first %v", r.Sent, r.Failed, r.FirstFail)
	}
}

var errFake = fakeError("fake")

type fakeError string

func (e fakeError) Error() string { return string(e) }
