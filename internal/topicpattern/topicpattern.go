// Package topicpattern bounds a topic pattern (a regular expression
// matched against whole topic names) before it is compiled: the
// coordinator's topic_pattern and the Kafka listener's KIP-848
// SubscribedTopicRegex. Go's regexp matches in time linear in the input
// but proportional to the compiled program, and a pattern is matched
// against every topic of the cluster: a short pattern expanding to a
// large program — `(.?){1000}`, 10 bytes, ~4,000 instructions — took
// 8.2 s over 10,000 topic names on this machine, and 76 s loaded inside
// the coordinator's event loop, where every tenant waited (review23).
// Below ~500 instructions Go's bounded backtracker runs instead:
// `(.?){60}` 19–24 ms, `(.?){120}` 32 ms, `(.?){250}` 2.0 s (10,000
// names, one run each, load ~10). DefaultMaxCost keeps every pattern
// in the fast range with room for what people write (`orders-.*` costs
// 12, `(orders|payments)-(eu|us)-[a-z]+` about 40).
package topicpattern

import "regexp/syntax"

// DefaultMaxBytes and DefaultMaxCost are the default bounds of a
// pattern's length and Cost.
const (
	DefaultMaxBytes = 512
	DefaultMaxCost  = 256
)

// Cost estimates the instructions of pattern's compiled program (as
// anchored to a whole topic name) by expanding repetitions over its
// parse tree (saturating, never compiling); an unparsable pattern costs
// 0 (compiling refuses it).
func Cost(pattern string) int {
	re, err := Parse(pattern)
	if err != nil {
		return 0
	}
	return treeCost(re)
}

// Parse parses pattern as matched against a whole topic name: Go's
// regexp syntax (Perl flags), the text parsed alone and then anchored at
// both ends, as "^(?:"+pattern+")$" reads when pattern is well formed.
// The text was once wrapped so and parsed together, and a text closing
// the wrapper's group itself escaped the anchors: `x)|(?:.*` read as
// `^(?:x)|(?:.*)$`, every name — the Kafka listener's KIP-848 regex took
// every topic the credential allowed (redteam19). Parsed alone it is
// refused (unexpected ")").
func Parse(pattern string) (*syntax.Regexp, error) {
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		return nil, err
	}
	// As the parser reads "^(?:"+pattern+")$": the group dissolves into
	// the concatenation (so Cost is the same), the anchors text's ends.
	sub := []*syntax.Regexp{{Op: syntax.OpBeginText, Flags: syntax.Perl}}
	if re.Op == syntax.OpConcat {
		sub = append(sub, re.Sub...)
	} else {
		sub = append(sub, re)
	}
	sub = append(sub, &syntax.Regexp{Op: syntax.OpEndText, Flags: syntax.Perl | syntax.WasDollar})
	return &syntax.Regexp{Op: syntax.OpConcat, Flags: syntax.Perl, Sub: sub}, nil
}

// Expansion is how much more pattern costs than its length in bytes:
// what its repetitions and large character classes add to the program
// beyond the text written. A repetition-free pattern of literals, as a
// list of topic names written as an alternation, `(orders|payments|…)`,
// costs about its length, and its length is bounded on its own (a
// 30-name alternation of ~16-byte names is ~500 bytes, cost ~450); the
// program's size is then at most its length plus the bound on Expansion.
func Expansion(pattern string) int {
	return max(Cost(pattern)-len(pattern), 0)
}

const costCap = 1 << 30

// classRunesPerCost is how many of a character class's range bounds
// (two per range) cost one more: 16 runes, 64 bytes, as much as an
// instruction. Topic names are ASCII letters, digits, '.', '_' and '-',
// so a class worth writing for them costs 1 (`[a-z0-9-]`, `\w`, `[^.]`),
// and a large Unicode class, which matches nothing more there, is what
// it holds.
const classRunesPerCost = 16

func treeCost(re *syntax.Regexp) int {
	sum := 0
	for _, sub := range re.Sub {
		sum = min(sum+treeCost(sub), costCap)
	}
	switch re.Op {
	case syntax.OpLiteral:
		return len(re.Rune)
	case syntax.OpCharClass:
		// One instruction, but it holds its ranges: \pL is ~1,500 of
		// them, 12 KB, and 170 of it (510 bytes, once cost 173) compiled to
		// 2.3 MB — held by every member joined with it (redteam18).
		return 1 + len(re.Rune)/classRunesPerCost
	case syntax.OpRepeat:
		times := re.Max
		if times < 0 {
			times = re.Min + 1
		}
		return min(sum*max(times, 1)+1, costCap)
	case syntax.OpConcat, syntax.OpAlternate, syntax.OpCapture:
		return sum + 1
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest:
		return sum + 2
	}
	return 1
}
