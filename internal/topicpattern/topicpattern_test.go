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
	// Large character classes too: \pL is one instruction holding ~1,500
	// range bounds, and 170 of it (510 bytes, cost 173 before classes
	// counted their ranges) compiled to 2.3 MB, held by every member
	// joined with it (redteam18).
	for _, p := range []string{`(.?){1000}`, `(.?){250}`, `([a-z]?){100}`, `(a{20}){20}`, strings.Repeat(`\pL`, 170), `\pL\pL\pL\pL`, strings.Repeat(`(?i:[\pL\pN])`, 39)} {
		if c := topicpattern.Cost(p); c <= topicpattern.DefaultMaxCost {
			t.Errorf("Cost(%q) = %d, within the default %d", p, c, topicpattern.DefaultMaxCost)
		}
	}
	for _, p := range []string{`orders-.*`, `(orders|payments)-(eu|us)-[a-z]+`, `billing\..*\.v[0-9]+`, `.*`, `t|u.*`, `[a-zA-Z0-9._-]+`, `(?i)orders-\w+`, `[^.]+\.events`} {
		if c := topicpattern.Cost(p); c > topicpattern.DefaultMaxCost/4 {
			t.Errorf("Cost(%q) = %d, want well within the default %d", p, c, topicpattern.DefaultMaxCost)
		}
	}
	if long := strings.Repeat("a", 40_000); len(long) <= topicpattern.DefaultMaxBytes {
		t.Fatal("a 40 KB pattern within the default length")
	}
}
