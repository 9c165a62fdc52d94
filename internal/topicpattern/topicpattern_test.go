package topicpattern_test

import (
	"math/rand/v2"
	"regexp/syntax"
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

// TestPatternTextCannotEscapeTheAnchors: a pattern is parsed alone and
// then anchored to the whole name. Wrapped as text, "^(?:"+p+")$", a
// pattern closing the wrapper's group escaped the anchors —
// `x)|(?:.*` read as `^(?:x)|(?:.*)$` and matched every name
// (redteam19) — and `\Qorders` quoted the wrapper's own tail. A
// well-formed pattern costs and matches as the wrapped text did
// (thousands of random ones).
func TestPatternTextCannotEscapeTheAnchors(t *testing.T) {
	for _, p := range []string{`x)|(?:.*`, `orders)|(?:.`, `a)|.*|(b`, `x)|(?:`, `orders\`} {
		if _, err := topicpattern.Compile(p); err == nil {
			t.Errorf("Compile(%q) compiled: a pattern that is not well formed alone", p)
		}
		if c := topicpattern.Cost(p); c != 0 {
			t.Errorf("Cost(%q) = %d, want 0 (not compiled)", p, c)
		}
	}
	m, err := topicpattern.Compile(`\Qorders`)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]bool{"orders": true, "orders-eu": false, "payments": false} {
		if got := m.Scanner(1 << 20).Match(name); got != want {
			t.Errorf(`\Qorders matches %q: %v, want %v`, name, got, want)
		}
	}
	rng := rand.New(rand.NewPCG(19, 19))
	for range 4000 {
		p := randomPattern(rng, 3)
		wrapped, err := syntax.Parse("^(?:"+p+")$", syntax.Perl)
		if err != nil {
			continue
		}
		if got, want := topicpattern.Cost(p), topicpattern.TreeCost(wrapped); got != want {
			t.Fatalf("Cost(%q) = %d, the wrapped text's %d", p, got, want)
		}
	}
}
