package kafkaproto

import (
	"fmt"
	"strings"
	"testing"
)

// TestTopicRegexIsBoundedBeforeMatching: the listener matches a KIP-848
// regex over every topic at each join and rematch; a 40 KB regex took
// 36 s over 1,000 topic names, and `(.?){1000}` (10 bytes) seconds
// (review23). Both are refused before compiling, as the coordinator
// refuses such a topic_pattern; what people write compiles.
func TestTopicRegexIsBoundedBeforeMatching(t *testing.T) {
	for text, says := range map[string]string{
		strings.Repeat("(a|b)", 8_000): "longer than 512 bytes",
		`(.?){1000}`:                   "too complex",
	} {
		if _, err := compileTopicRegex(text); err == nil || !strings.Contains(err.Error(), says) {
			t.Errorf("compileTopicRegex(%.40q…): %v, want an error saying %q", text, err, says)
		}
	}
	for _, text := range []string{`orders-.*`, `^ord.*`, `(orders|payments)-(eu|us)-[a-z]+`} {
		if _, err := compileTopicRegex(text); err != nil {
			t.Errorf("compileTopicRegex(%q): %v", text, err)
		}
	}
}

// TestTopicRegexIsBoundedAsTheCoordinatorBoundsAPattern: the listener
// applies the coordinator's rule (topic_pattern_cost bounds what a
// pattern adds beyond its length): a list of 30 topic names written as
// an alternation (391 bytes, cost 365) joins through either door — it
// was INVALID_REGULAR_EXPRESSION here while it joined over HTTP — and a
// regex closing the anchoring group itself is refused, not read as
// `^(?:orders)|(?:.)$` (every name).
func TestTopicRegexIsBoundedAsTheCoordinatorBoundsAPattern(t *testing.T) {
	names := make([]string, 30)
	for i := range names {
		// No two neighbours share a first letter: Go's parser factors
		// an alternation's common prefixes out.
		names[i] = fmt.Sprintf("%c%c-orders-%02d", 'a'+i%26, 'a'+i*7%26, i)
	}
	list := "(" + strings.Join(names, "|") + ")"
	m, err := compileTopicRegex(list)
	if err != nil {
		t.Fatalf("a %d-byte alternation of 30 names: %v", len(list), err)
	}
	if s := m.Scanner(1 << 20); !s.Match(names[17]) || s.Match("aa-orders-30") {
		t.Errorf("the alternation matches a name outside it, or not one of its names")
	}
	if _, err := compileTopicRegex(`orders)|(?:.`); err == nil {
		t.Errorf("`orders)|(?:.` compiled")
	}
}
