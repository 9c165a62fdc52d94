package main

import (
	"strings"
	"testing"
)

// TestUnknownVariablesAreWarnedOf: a CAPGATE_* variable the CLI does not
// read is warned of on stderr, with the variable it may have meant — it
// was ignored without a word, so CAPGATE_GATEWAY_URL (the list is _URLS)
// sent consume to the default gateway. The CLI's own variables and a
// setting's (for capgate coordinator|gateway in the same shell) are not.
func TestUnknownVariablesAreWarnedOf(t *testing.T) {
	for _, name := range []string{"CAPGATE_GATEWAY_URL", "CAPGATE_COORDINATOR", "CAPGATE_TOKEN", "CAPGATE_FROBNICATE",
		"CAPGATE_GATEWAY_URLS", "CAPGATE_ADMIN_TOKEN", "CAPGATE_GATEWAY_SYNC_TIMEOUT"} {
		t.Setenv(name, "5s") // a duration is a value every one of them takes
	}
	out, err := run(t, "version", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	const ignored = "is set, but capgate reads no such variable: it is ignored"
	wants := map[string]string{"CAPGATE_GATEWAY_URL": "; did you mean CAPGATE_GATEWAY_URLS?", "CAPGATE_COORDINATOR": "; did you mean CAPGATE_COORDINATOR_URL?",
		"CAPGATE_TOKEN": "; did you mean CAPGATE_ADMIN_TOKEN?", "CAPGATE_FROBNICATE": " (capgate help environment lists them)"}
	for name, tail := range wants {
		if want := "capgate: warning: " + name + " " + ignored + tail; !strings.Contains(out, want) {
			t.Errorf("capgate version does not warn %q:\n%s", want, out)
		}
	}
	for _, quiet := range []string{"CAPGATE_GATEWAY_URLS is", "CAPGATE_ADMIN_TOKEN is", "CAPGATE_GATEWAY_SYNC_TIMEOUT"} {
		if strings.Contains(out, quiet) {
			t.Errorf("warned of %s, which capgate reads:\n%s", quiet, out)
		}
	}
	if n := strings.Count(out, "warning:"); n != 4 {
		t.Errorf("%d warnings, want 4 (one per unknown variable):\n%s", n, out)
	}
}
