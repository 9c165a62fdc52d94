package kafkaproto

import (
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
