package ocap

import "testing"

// TestValidNameRefusesDotSegments: "." and ".." were valid names, but a
// URL path drops them (even escaped), so a group so named could never
// be reached by a route: the Kafka listener's join of group "." got an
// unexplained 404 and the admin API's /v1/admin/groups/. listed groups.
func TestValidNameRefusesDotSegments(t *testing.T) {
	for name, want := range map[string]bool{
		".": false, "..": false, "...": true, ".a": true, "a.": true, "orders.v2": true,
		"": false, "a/b": false, "a b": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}
