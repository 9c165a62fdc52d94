package api

import "math"

// Numbers in request paths and query strings have one spelling on both
// processes: ASCII decimal digits, no sign, no spaces, no leading zero
// ("0" itself). A path names a resource, so a partition has one path:
// /partitions/3/ and /partitions/03/ are never two names a proxy rule, a
// cache or an access log could tell apart. A number outside its
// parameter's range is refused (400 naming the parameter and the range),
// never saturated or wrapped: an answer must be about what was asked.

// DecimalRule is how a refused number is told the spelling wanted.
const DecimalRule = "a decimal integer without sign or leading zeros"

// PartitionMax is the largest partition number (Kafka's int32).
const PartitionMax = math.MaxInt32

// PartitionRule is the message of a refused partition in a path.
const PartitionRule = "partition must be " + DecimalRule + " in [0, 2147483647]"

// ParseDecimal reads s, a number in the one spelling above, within
// [0, max] (max ≥ 0); ok is false for anything else. It does not allocate.
func ParseDecimal[T ~string | ~[]byte](s T, max int64) (n int64, ok bool) {
	if len(s) == 0 || (s[0] == '0' && len(s) > 1) {
		return 0, false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		d := int64(c - '0')
		if n > max/10 || n*10 > max-d {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// ParsePartition reads a partition number from a path: ParseDecimal
// within [0, PartitionMax].
func ParsePartition[T ~string | ~[]byte](s T) (int32, bool) {
	n, ok := ParseDecimal(s, PartitionMax)
	return int32(n), ok
}
