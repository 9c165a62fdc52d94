package api

import (
	"math"
	"math/rand/v2"
	"strconv"
	"testing"
)

func TestParseDecimal(t *testing.T) {
	cases := []struct {
		s   string
		max int64
		n   int64
		ok  bool
	}{
		{"0", 0, 0, true},
		{"5", 0, 0, false},
		{"7", 9, 7, true},
		{"10", 9, 0, false},
		{"2147483647", math.MaxInt32, math.MaxInt32, true},
		{"2147483648", math.MaxInt32, 0, false},
		{"9223372036854775807", math.MaxInt64, math.MaxInt64, true},
		{"9223372036854775808", math.MaxInt64, 0, false},
		{"99999999999999999999999", math.MaxInt64, 0, false},
		{"", math.MaxInt64, 0, false},
		{"00", math.MaxInt64, 0, false},
		{"03", math.MaxInt64, 0, false},
		{"+3", math.MaxInt64, 0, false},
		{"-3", math.MaxInt64, 0, false},
		{" 3", math.MaxInt64, 0, false},
		{"3 ", math.MaxInt64, 0, false},
		{"3e2", math.MaxInt64, 0, false},
		{"٣", math.MaxInt64, 0, false},
	}
	for _, c := range cases {
		n, ok := ParseDecimal(c.s, c.max)
		if n != c.n && c.ok || ok != c.ok {
			t.Errorf("ParseDecimal(%q, %d) = %d, %v; want %d, %v", c.s, c.max, n, ok, c.n, c.ok)
		}
		if nb, okb := ParseDecimal([]byte(c.s), c.max); nb != n || okb != ok {
			t.Errorf("ParseDecimal([]byte(%q)) = %d, %v; as a string %d, %v", c.s, nb, okb, n, ok)
		}
	}
}

// TestParseDecimalAgainstStrconv checks ParseDecimal against the naive
// rule — strconv's value, re-formatted to the same text, within range —
// on random digit strings and bounds.
func TestParseDecimalAgainstStrconv(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	const alphabet = "0123456789+- x"
	for range 200_000 {
		b := make([]byte, rng.IntN(22))
		for i := range b {
			if rng.IntN(20) == 0 {
				b[i] = alphabet[10+rng.IntN(len(alphabet)-10)]
			} else {
				b[i] = alphabet[rng.IntN(10)]
			}
		}
		max := []int64{0, 9, math.MaxInt32, math.MaxInt64, rng.Int64()}[rng.IntN(5)]
		s := string(b)
		v, err := strconv.ParseInt(s, 10, 64)
		wantOK := err == nil && strconv.FormatInt(v, 10) == s && v >= 0 && v <= max
		n, ok := ParseDecimal(s, max)
		if ok != wantOK || ok && n != v {
			t.Fatalf("ParseDecimal(%q, %d) = %d, %v; strconv says %d, %v", s, max, n, ok, v, wantOK)
		}
	}
}

func TestParsePartitionAllocatesNothing(t *testing.T) {
	b := []byte("2147483647")
	if allocs := testing.AllocsPerRun(100, func() { _, _ = ParsePartition(b) }); allocs != 0 {
		t.Fatalf("%v allocations", allocs)
	}
}
