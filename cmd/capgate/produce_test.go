package main

import (
	"strings"
	"testing"
)

// TestProduceShortFlagsDoNotClash: kcat's -k (a record key) is no
// shorthand here, since --key is the TLS client key: `produce -k x` is a
// usage error (exit 2), never a record key; -o takes text or json only.
func TestProduceShortFlagsDoNotClash(t *testing.T) {
	for _, c := range []struct {
		args []string
		says string
	}{
		{[]string{"produce", "-t", "demo", "-k", "x"}, "unknown shorthand flag: 'k'"},
		{[]string{"produce", "-t", "demo", "-o", "table", "--capability", "c", "-p", "0"}, "--output: want text or json"},
	} {
		_, err := run(t, c.args...)
		if err == nil || !strings.Contains(err.Error(), c.says) || exitCode(err) != exitUsage {
			t.Errorf("capgate %s: %v (exit %d), want a usage error saying %q", strings.Join(c.args, " "), err, exitCode(err), c.says)
		}
	}
}
