package main

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestTTLFlagsRefusedInTheFlagsWords is redteam4 item 9: `admin
// client-credential --ttl -1s` answered "ttl_ms must be >= 0" and --ttl
// 100000h "ttl_ms must be within [1000, client_credential_ttl_max]":
// the user reads neither the flag they typed nor the maximum's value
// (the oauth-client's token_ttl_ms alike). A value below the floor is a
// usage error before anything is sent; one above the coordinator's
// setting comes back 400 and is worded as the flag, the value typed,
// the setting and its value. Both exit 2, as other usage errors.
func TestTTLFlagsRefusedInTheFlagsWords(t *testing.T) {
	var requests atomic.Int64
	silent := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	defer silent.Close()
	usage := func(base, admin string, args []string, want string) {
		t.Helper()
		out, err := run(t, append(append([]string{"admin"}, args...), "--coordinator", base, "--token", admin)...)
		if err == nil || exitCode(err) != exitUsage || err.Error() != want {
			t.Errorf("admin %s: %v (exit %d), printed %q\nwant exit 2 and %q", strings.Join(args, " "), err, exitCode(err), out, want)
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"client-credential", "--name", "svc", "--groups", "g", "--ttl", "-1s"},
			"--ttl -1s is below 1s: a credential lasts at least 1s; 0 asks for the coordinator's member_token_ttl"},
		{[]string{"oauth-client", "create", "--name", "svc", "--groups", "g", "--topics", "t", "--token-ttl", "500ms"},
			"--token-ttl 500ms is below 1s: a credential lasts at least 1s; 0 asks for the coordinator's oauth.token_ttl"},
		{[]string{"lease", "g", "demo", "0", "--holder", "h", "--ttl", "10ms"}, "--ttl 10ms is below 1s: a lease's capability lasts at least 1s"},
		{[]string{"grant", "--topic", "demo", "--partition", "0", "--holder", "h", "--ttl", "-5m"}, "--ttl -5m is below 1s: a capability lasts at least 1s"},
		{[]string{"qos", "--group", "g", "--ttl", "0s"}, "--ttl 0s is below 1ms: an override lasts at least 1ms"},
		{[]string{"config", "g", "--handoff-timeout", "-1s"}, "--handoff-timeout -1s is below 1ms: a handoff's wait lasts at least 1ms"},
	} {
		usage(silent.URL, "x", tc.args, tc.want)
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the coordinator; want none", n)
	}

	base, admin := startCoordinator(t)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"client-credential", "--name", "svc", "--groups", "g", "--ttl", "100000h"},
			"--ttl 100000h is above coordinator.client_credential_ttl_max (720h0m0s): ask for at most 720h0m0s, or raise coordinator.client_credential_ttl_max on the coordinator"},
		{[]string{"oauth-client", "create", "--name", "svc", "--groups", "g", "--topics", "t", "--token-ttl", "31d"}, ""},
		{[]string{"oauth-client", "create", "--name", "svc", "--groups", "g", "--topics", "t", "--token-ttl", "744h"},
			"--token-ttl 744h is above coordinator.client_credential_ttl_max (720h0m0s): ask for at most 720h0m0s, or raise coordinator.client_credential_ttl_max on the coordinator"},
		{[]string{"grant", "--topic", "orders", "--partition", "0", "--holder", "h", "--ttl", "1h"},
			"--ttl 1h is above coordinator.max_lease (10m0s): ask for at most 10m0s, or raise coordinator.max_lease on the coordinator"},
		{[]string{"qos", "--group", "g", "--ttl", "25h"},
			"--ttl 25h is above coordinator.groups.limits.qos_ttl_max (24h0m0s): ask for at most 24h0m0s, or raise coordinator.groups.limits.qos_ttl_max on the coordinator"},
		{[]string{"config", "g", "--handoff-timeout", "6m"},
			"--handoff-timeout 6m: group config: handoff_timeout_ms 360000 (6m0s) is outside [1, 300000] (1ms to 5m0s: coordinator.groups.handoff_timeout_max)"},
	} {
		if tc.want == "" { // "31d" is no Go duration: a flag parse error, exit 2 too
			if _, err := run(t, append(append([]string{"admin"}, tc.args...), "--coordinator", base, "--token", admin)...); exitCode(err) != exitUsage {
				t.Errorf("admin %s: %v, want exit 2", strings.Join(tc.args, " "), err)
			}
			continue
		}
		usage(base, admin, tc.args, tc.want)
	}
	// Within the bounds the commands go through.
	for _, args := range [][]string{
		{"client-credential", "--name", "svc", "--groups", "g", "--ttl", "720h"},
		{"client-credential", "--name", "svc", "--groups", "g", "--ttl", "0s"},
		{"grant", "--topic", "orders", "--partition", "0", "--holder", "h", "--ttl", "10m"},
	} {
		if out, err := run(t, append(append([]string{"admin"}, args...), "--coordinator", base, "--token", admin)...); err != nil {
			t.Errorf("admin %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
