package faults

import (
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/capgate/capgate/e2e/harness"
)

// TestChurn: members join and leave every 1–5s for 60s (15s with -short),
// from a seeded schedule (CAPGATE_E2E_SEED overrides the seed; a failure
// names it). One leave in four is a crash (the member's network is cut
// and it never leaves) instead of a graceful close. Between one and five
// members are alive at any time. The checkers hold over the whole run.
func TestChurn(t *testing.T) {
	t.Parallel()
	const group = "churn"
	seed := uint64(1)
	if s := os.Getenv("CAPGATE_E2E_SEED"); s != "" {
		var err error
		if seed, err = strconv.ParseUint(s, 10, 64); err != nil {
			t.Fatalf("CAPGATE_E2E_SEED: %v", err)
		}
	}
	length := 60 * time.Second
	if testing.Short() {
		length = 15 * time.Second
	}
	t.Logf("seed %d (set CAPGATE_E2E_SEED to replay), churn for %v", seed, length)
	rng := rand.New(rand.NewPCG(seed, seed))
	c := harness.Start(t, harness.Options{Groups: []string{group}, Binaries: binaries})
	prod := c.StartProducer(t, produceEvery)

	live, counts := churn(t, c, group, rng, length)
	t.Logf("churn: %d joins, %d graceful leaves, %d crashes; %d members at the end", counts[0], counts[1], counts[2], len(live))
	waitSettled(t, c, group, len(live))
	waitFlowing(t, c, group, 200)
	s := finish(t, c, prod, group)
	handoffs := 0
	for _, g := range s.Grants {
		if !g.Renewal && g.Epoch > 1 {
			handoffs++
		}
	}
	t.Logf("%d grants after the first of their partition", handoffs)
	if handoffs == 0 || counts[1]+counts[2] == 0 {
		t.Errorf("the churn exercised nothing: %d handoffs, %d graceful leaves, %d crashes (seed %d)", handoffs, counts[1], counts[2], seed)
	}
}

// churn joins and removes members every 1–5s for length and returns the
// members alive at the end, with the counts of joins, graceful leaves and
// crashes.
func churn(t *testing.T, c *harness.Cluster, group string, rng *rand.Rand, length time.Duration) ([]*harness.Member, [3]int) {
	var counts [3]int
	join := func() *harness.Member {
		counts[0]++
		return c.StartMember(t, harness.MemberOptions{Name: "m" + strconv.Itoa(counts[0]), Group: group})
	}
	live := []*harness.Member{join(), join()}
	for end := time.Now().Add(length); time.Now().Before(end); {
		time.Sleep(time.Second + time.Duration(rng.Int64N(int64(4*time.Second)))) // the churn's pace, not a wait
		switch n := len(live); {
		case n <= 1 || (n < 5 && rng.IntN(2) == 0):
			live = append(live, join())
		default:
			i := rng.IntN(n)
			if rng.IntN(4) == 0 {
				live[i].Kill()
				counts[2]++
			} else {
				live[i].Close(t)
				counts[1]++
			}
			live = append(live[:i], live[i+1:]...)
		}
	}
	return live, counts
}
