package gateway

import (
	"strings"
	"testing"
)

func TestMatchPath(t *testing.T) {
	records := strings.Split("v1/topics//partitions//records", "/")
	for _, c := range []struct {
		pattern []string
		path    string
		ok      bool
		params  [2]string
	}{
		{[]string{"healthz"}, "/healthz", true, [2]string{}},
		{[]string{"healthz"}, "/healthz/", false, [2]string{}},
		{[]string{"healthz"}, "healthz", false, [2]string{}},
		{[]string{"healthz"}, "/", false, [2]string{}},
		{records, "/v1/topics/orders/partitions/3/records", true, [2]string{"orders", "3"}},
		{records, "/v1/topics//partitions/3/records", false, [2]string{}},
		{records, "/v1/topics/a/b/partitions/3/records", false, [2]string{}},
		{records, "/v1/topics/orders/partitions/3/records/", false, [2]string{}},
		{records, "/v1/topics/orders/partitions/3", false, [2]string{}},
	} {
		var p routeParams
		ok := matchPath(c.pattern, []byte(c.path), &p)
		if ok != c.ok || (ok && (string(p[0]) != c.params[0] || string(p[1]) != c.params[1])) {
			t.Errorf("%q against %q: %v %q %q, want %v %q", c.path, c.pattern, ok, p[0], p[1], c.ok, c.params)
		}
	}
	path := []byte("/v1/topics/orders/partitions/3/records")
	if n := testing.AllocsPerRun(100, func() {
		var p routeParams
		matchPath(records, path, &p)
	}); n != 0 {
		t.Fatalf("matchPath allocates %v times", n)
	}
}
