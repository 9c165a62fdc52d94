package api

import "testing"

func TestContentCodingProblem(t *testing.T) {
	for _, c := range []struct {
		lines  []string
		refuse bool
	}{
		{nil, false},
		{[]string{""}, false},
		{[]string{"identity"}, false},
		{[]string{"Identity , identity"}, false},
		{[]string{"gzip"}, true},
		{[]string{"identity, gzip"}, true},
		{[]string{"identity", "br"}, true},
		{[]string{"x-gzip"}, true},
	} {
		var lines [][]byte
		for _, l := range c.lines {
			lines = append(lines, []byte(l))
		}
		if got := ContentCodingProblem(lines) != ""; got != c.refuse {
			t.Errorf("ContentCodingProblem(%q) refuses: %v, want %v", c.lines, got, c.refuse)
		}
	}
}
