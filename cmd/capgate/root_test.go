package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestUnknownSubcommandFails: a word a grouping command does not know is
// an error naming it (with a suggestion when one is close), not its help
// and exit 0 — `capgate admin describe demo` looked like success.
func TestUnknownSubcommandFails(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "describe", "demo"}, `unknown command "describe" for "capgate admin"`},
		{[]string{"admin", "gatways"}, `did you mean gateways?`},
		{[]string{"keys", "nosuch"}, `unknown command "nosuch" for "capgate keys"`},
		{[]string{"token", "inspekt"}, `did you mean inspect?`},
		{[]string{"admin", "oauth-client", "delete", "x"}, `unknown command "delete" for "capgate admin oauth-client"`},
		{[]string{"nosuch"}, `unknown command "nosuch" for "capgate"`},
	} {
		root := newRoot()
		var out bytes.Buffer
		root.SetOut(&out)
		root.SetErr(&out)
		root.SetArgs(c.args)
		err := root.Execute()
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("capgate %s: %v, want an error containing %q", strings.Join(c.args, " "), err, c.want)
		}
	}
	// Without a word, a grouping command still shows its help.
	root := newRoot()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetArgs([]string{"admin"})
	if err := root.Execute(); err != nil || !strings.Contains(out.String(), "Available Commands:") {
		t.Fatalf("capgate admin: %v\n%s", err, out.String())
	}
}
