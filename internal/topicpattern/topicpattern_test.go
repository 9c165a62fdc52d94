package topicpattern_test

import (
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/topicpattern"
)

// TestShortPatternsThatExpandAreOverTheDefault: the attack review23
// measured — `(.?){1000}`, 10 bytes, 76 s inside the coordinator's loop
// over 10,000 topics, and a 40 KB regex through the Kafka listener — is
// over the default bounds, while what people write is well under them.
func TestShortPatternsThatExpandAreOverTheDefault(t *testing.T) {
	for _, p := range []string{`(.?){1000}`, `(.?){250}`, `([a-z]?){100}`, `(a{20}){20}`} {
		if c := topicpattern.Cost(p); c <= topicpattern.DefaultMaxCost {
			t.Errorf("Cost(%q) = %d, within the default %d", p, c, topicpattern.DefaultMaxCost)
		}
	}
	for _, p := range []string{`orders-.*`, `(orders|payments)-(eu|us)-[a-z]+`, `billing\..*\.v[0-9]+`, `.*`, `t|u.*`} {
		if c := topicpattern.Cost(p); c > topicpattern.DefaultMaxCost/4 {
			t.Errorf("Cost(%q) = %d, want well within the default %d", p, c, topicpattern.DefaultMaxCost)
		}
	}
	if long := strings.Repeat("a", 40_000); len(long) <= topicpattern.DefaultMaxBytes {
		t.Fatal("a 40 KB pattern within the default length")
	}
}
