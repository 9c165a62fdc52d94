package topicpattern_test

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	"github.com/capgate/capgate/internal/topicpattern"
)

// TestMatcherIsRegexp: the counting matcher answers as Go's regexp
// anchored to the whole name, on thousands of random patterns (classes,
// alternations, repetitions, empty-width assertions, case folding,
// Unicode) and names (topic-like, multi-byte, invalid UTF-8, newlines).
func TestMatcherIsRegexp(t *testing.T) {
	rng := rand.New(rand.NewPCG(18, 18))
	for i := range 4000 {
		pattern := randomPattern(rng, 3)
		re, err := regexp.Compile("^(?:" + pattern + ")$")
		m, err2 := topicpattern.Compile(pattern)
		if (err == nil) != (err2 == nil) {
			t.Fatalf("pattern %q: regexp error %v, matcher error %v", pattern, err, err2)
		}
		if err != nil {
			continue
		}
		s := m.Scanner(1 << 40)
		for range 20 {
			name := randomName(rng)
			if got, want := s.Match(name), re.MatchString(name); got != want {
				t.Fatalf("#%d pattern %q name %q: matcher %v, regexp %v", i, pattern, name, got, want)
			}
		}
	}
}

func randomPattern(rng *rand.Rand, depth int) string {
	atoms := []string{"a", "b", "-", ".", `\.`, "[a-c]", "[^b]", `\d`, `\w`, `\b`, `\B`, "^", "$", "(?i:A)", "é", `\p{L}`, "(?m:^)", "(?m:$)", "(?s:.)", "[[:alpha:]]", `\z`, `\A`, "x*?", ""}
	if depth == 0 || rng.IntN(3) == 0 {
		return atoms[rng.IntN(len(atoms))]
	}
	a, b := randomPattern(rng, depth-1), randomPattern(rng, depth-1)
	switch rng.IntN(8) {
	case 0:
		return a + b
	case 1:
		return "(" + a + "|" + b + ")"
	case 2:
		return "(?:" + a + ")*"
	case 3:
		return "(" + a + ")?"
	case 4:
		return "(?:" + a + ")+" + b
	case 5:
		return fmt.Sprintf("(?:%s){%d,%d}", a, rng.IntN(3), 2+rng.IntN(3))
	case 6:
		return "(?:" + a + "){2,}"
	}
	return a + "|" + b
}

func randomName(rng *rand.Rand) string {
	parts := []string{"a", "b", "c", "-", ".", "1", "A", "é", "\n", "\xff", "_", "B", "ab"}
	var sb strings.Builder
	for range rng.IntN(9) {
		sb.WriteString(parts[rng.IntN(len(parts))])
	}
	return sb.String()
}

// TestFailingMatchesAreCounted: a pattern well within the cost bound
// whose every match fails after exploring all it can reach — `(.?){60}x`,
// 1.1 s over 10,000 names in Go's regexp (redteam18) — is past
// DefaultMaxSteps over such a list, while what people write stays far
// under it, and a name never takes more than (length+1) × the program.
func TestFailingMatchesAreCounted(t *testing.T) {
	names := make([]string, 10_000)
	for i := range names {
		names[i] = fmt.Sprintf("team-%04d.service-events.orders-v%d", i, i%7)
	}
	steps := func(pattern string) (int, bool) {
		m, err := topicpattern.Compile(pattern)
		if err != nil {
			t.Fatal(err)
		}
		s := m.Scanner(topicpattern.DefaultMaxSteps)
		for _, n := range names {
			s.Match(n)
		}
		return s.Steps(), s.Over()
	}
	for _, p := range []string{`(.?){60}x`, `(.*){60}x`, `(.?.?){30}x`, `([a-z0-9._-]?){60}x`} {
		if c := topicpattern.Cost(p); c > topicpattern.DefaultMaxCost {
			t.Fatalf("Cost(%q) = %d: not the attack (past the cost bound already)", p, c)
		}
		if n, over := steps(p); !over {
			t.Errorf("%q over 10,000 names: %d steps, within DefaultMaxSteps %d", p, n, topicpattern.DefaultMaxSteps)
		}
	}
	for _, p := range []string{`orders-.*`, `.*-events`, `.*\.orders\..*`, `(orders|payments)-(eu|us)-[a-z]+`, `team-[0-9]+\..*`, `.*(orders|payments).*`} {
		n, over := steps(p)
		t.Logf("%q: %d steps", p, n)
		if over {
			t.Errorf("%q over 10,000 names: %d steps, want within DefaultMaxSteps %d", p, n, topicpattern.DefaultMaxSteps)
		}
	}
	m, _ := topicpattern.Compile(`(.?){60}x`)
	s := m.Scanner(1 << 40)
	s.Match(names[0])
	if limit := (len(names[0]) + 1) * 245; s.Steps() > limit {
		t.Errorf("one name of %d characters took %d steps, more than (length+1) × program %d", len(names[0]), s.Steps(), limit)
	}
}
