package coordinator

import "testing"

// TestIsBaseURL: a standby redirects a browser only to a bare http(s)
// origin; a leader URL carrying user info, a path, a query, a fragment or
// a line break (the log's beat is written by whoever can produce to the
// state topic) gets the 421 instead.
func TestIsBaseURL(t *testing.T) {
	for u, want := range map[string]bool{
		"http://10.0.0.1:7070":           true,
		"https://coord-2.example.com":    true,
		"https://coord-2.example.com/":   true,
		"":                               false,
		"coord-2:7070":                   false,
		"ftp://coord-2":                  false,
		"javascript:alert(1)":            false,
		"https://user@evil.example":      false,
		"https://coord-2/login":          false,
		"https://coord-2?next=evil":      false,
		"https://coord-2#x":              false,
		"https://coord-2\r\nSet-Cookie:": false,
		"//evil.example":                 false,
	} {
		if got := isBaseURL(u); got != want {
			t.Errorf("isBaseURL(%q) = %v, want %v", u, got, want)
		}
	}
}
