package coordinator

import "testing"

// TestWhoIs: who= names an admin by the whole who or, for one that came
// with a client certificate and a token, by either part.
func TestWhoIs(t *testing.T) {
	for _, c := range []struct {
		who, w string
		want   bool
	}{
		{"token:0123456789ab", "token:0123456789ab", true},
		{"cert:ops team token:0123456789ab", "token:0123456789ab", true},
		{"cert:ops team token:0123456789ab", "cert:ops team", true},
		{"cert:ops team token:0123456789ab", "cert:ops team token:0123456789ab", true},
		{"cert:ops team token:0123456789ab", "cert:ops", false},
		{"cert:ops team token:0123456789ab", "team token:0123456789ab", false},
		{"console:alice", "console", false},
		{"console:alice", "console:alice", true},
		{"token:0123456789ab", "token:0123", false},
	} {
		if got := whoIs(c.who, c.w); got != c.want {
			t.Errorf("whoIs(%q, %q) = %t, want %t", c.who, c.w, got, c.want)
		}
	}
}
