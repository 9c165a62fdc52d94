package topicpattern

import (
	"regexp/syntax"
	"unicode/utf8"
)

// DefaultMaxSteps is the default bound of the work of matching one
// pattern against a whole topic list (Matcher.MatchAll's steps). Cost
// bounds a pattern's program, not the work of running it: the program
// runs once per topic, and a failing match explores every state it can
// reach at every position of the name. `(.?){60}x` (9 bytes, cost 245)
// took 1.1 s over 10,000 names of 40 characters (~6,500 states each),
// where `.*-events` took 10 ms and `(.?){60}`, which matches at its first
// try, 20 ms (redteam18); counted here, 60.9 M steps. 4 Mi steps is
// tens of ms of one core at worst, and holds what people write over
// 10,000 such names: `orders-.*` 0.02 M, `.*-events` 1.15 M,
// `.*\.orders\..*` 1.14 M, `.*(orders|payments).*` 2.3 M.
const DefaultMaxSteps = 4 << 20

// Matcher matches a topic pattern against whole topic names (anchored,
// as Compile anchors it) and counts its work: each state of the
// pattern's program a match visits at each position of a name is one
// step (Thompson's simulation without captures: a state is visited at
// most once per position, so a name of n characters takes at most
// (n+1) × the program's size). The count depends on the pattern and the
// names only, never on timing, so a pure core can bound it. A Matcher
// is safe for concurrent use; a Scanner is not.
type Matcher struct {
	prog *syntax.Prog
}

// Compile compiles pattern as matched against a whole topic name (Parse):
// Go's regexp syntax (Perl flags), as regexp.Compile("^(?:"+pattern+")$")
// for a well-formed pattern.
func Compile(pattern string) (*Matcher, error) {
	re, err := Parse(pattern)
	if err != nil {
		return nil, err
	}
	prog, err := syntax.Compile(re.Simplify())
	if err != nil {
		return nil, err
	}
	return &Matcher{prog: prog}, nil
}

// Never is a Matcher that matches no name.
func Never() *Matcher {
	prog, err := syntax.Compile(&syntax.Regexp{Op: syntax.OpNoMatch})
	if err != nil {
		panic(err) // a constant program
	}
	return &Matcher{prog: prog}
}

// Scanner matches names with one Matcher, reusing its state sets; not
// safe for concurrent use.
type Scanner struct {
	prog       *syntax.Prog
	cur, next  stateSet
	stack      []uint32
	steps, max int
}

// Scanner returns a Scanner allowed maxSteps steps in all (Over once
// they are spent).
func (m *Matcher) Scanner(maxSteps int) *Scanner {
	n := len(m.prog.Inst)
	return &Scanner{prog: m.prog, cur: newStateSet(n), next: newStateSet(n), max: maxSteps}
}

// Steps is the work the scanner's matches took so far.
func (s *Scanner) Steps() int { return s.steps }

// Over reports whether the scanner's matches took more than its
// maxSteps; a match that ran over stops and reports no match.
func (s *Scanner) Over() bool { return s.steps > s.max }

// Match reports whether the pattern matches the whole of name. Once the
// scanner is Over it answers false without matching.
func (s *Scanner) Match(name string) bool {
	if s.Over() {
		return false
	}
	s.cur.clear()
	r, width := nextRune(name, 0)
	s.add(&s.cur, uint32(s.prog.Start), syntax.EmptyOpContext(-1, r))
	for pos := 0; r != -1 && s.cur.len() > 0 && !s.Over(); {
		after, afterWidth := nextRune(name, pos+width)
		s.next.clear()
		for _, pc := range s.cur.live {
			if inst := &s.prog.Inst[pc]; consumes(inst, r) {
				s.add(&s.next, inst.Out, syntax.EmptyOpContext(r, after))
			}
		}
		s.cur, s.next = s.next, s.cur
		pos, r, width = pos+width, after, afterWidth
	}
	if s.Over() {
		return false
	}
	for _, pc := range s.cur.live {
		if s.prog.Inst[pc].Op == syntax.InstMatch {
			return true
		}
	}
	return false
}

// nextRune is the rune at byte offset pos of name and its width, -1 past
// the end (the empty-width context of an edge).
func nextRune(name string, pos int) (rune, int) {
	if pos >= len(name) {
		return -1, 0
	}
	return utf8.DecodeRuneInString(name[pos:])
}

// consumes reports whether inst is a rune instruction matching r.
func consumes(inst *syntax.Inst, r rune) bool {
	switch inst.Op {
	case syntax.InstRune:
		return inst.MatchRune(r)
	case syntax.InstRune1:
		return r == inst.Rune[0]
	case syntax.InstRuneAny:
		return true
	case syntax.InstRuneAnyNotNL:
		return r != '\n'
	}
	return false
}

// add puts pc and every state reachable from it without consuming (the
// empty-width assertions holding in context flag) into q, a step each;
// the states that consume a rune, or match, go to q.live too.
func (s *Scanner) add(q *stateSet, pc uint32, flag syntax.EmptyOp) {
	s.stack = append(s.stack[:0], pc)
	for len(s.stack) > 0 {
		pc := s.stack[len(s.stack)-1]
		s.stack = s.stack[:len(s.stack)-1]
		for !q.has(pc) { // follow one chain, the other branch of an Alt stacked
			q.insert(pc)
			s.steps++
			inst := &s.prog.Inst[pc]
			switch inst.Op {
			case syntax.InstAlt, syntax.InstAltMatch:
				s.stack = append(s.stack, inst.Arg)
				pc = inst.Out
				continue
			case syntax.InstCapture, syntax.InstNop:
				pc = inst.Out
				continue
			case syntax.InstEmptyWidth:
				if syntax.EmptyOp(inst.Arg)&^flag == 0 {
					pc = inst.Out
					continue
				}
			case syntax.InstRune, syntax.InstRune1, syntax.InstRuneAny, syntax.InstRuneAnyNotNL, syntax.InstMatch:
				q.live = append(q.live, pc)
			}
			break
		}
	}
}

// stateSet is a sparse set of program counters (Briggs and Torczon):
// cleared in constant time, iterated in insertion order.
type stateSet struct {
	sparse []uint32
	dense  []uint32
	live   []uint32 // the states of dense that consume a rune or match
}

func newStateSet(n int) stateSet {
	return stateSet{sparse: make([]uint32, n), dense: make([]uint32, 0, n), live: make([]uint32, 0, n)}
}

func (q *stateSet) has(pc uint32) bool {
	i := q.sparse[pc]
	return int(i) < len(q.dense) && q.dense[i] == pc
}

func (q *stateSet) insert(pc uint32) {
	q.sparse[pc] = uint32(len(q.dense))
	q.dense = append(q.dense, pc)
}

func (q *stateSet) clear()   { q.dense, q.live = q.dense[:0], q.live[:0] }
func (q *stateSet) len() int { return len(q.dense) }
