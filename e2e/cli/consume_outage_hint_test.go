package cli_test

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/internal/stack"
)

// TestConsumeHintsEachGatewayOutage: consume's fetch hint (which flag to
// check) went with the first "the gateway did not answer" warning of a
// gateway for the whole run — a gateway that answered for an hour and
// then went silent had its warnings bare, the hint scrolled away long
// before (newuser7). Each outage's first warning carries it: a gateway
// (behind a proxy the test silences) that never answered, then answered
// a record, then went silent again, is hinted twice.
func TestConsumeHintsEachGatewayOutage(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	proxy := gatewayProxy(t, d)
	proxy.Blackhole()
	// Its first outage is from the start: --unreachable-exit 0 waits
	// for the gateway for ever (10 s, the default, would end it).
	args := d.consumeArgs("outagehint", "--unreachable-exit", "0")
	for i, a := range args {
		if a == d.gateway {
			args[i] = proxy.URL()
		}
	}
	p := startConsume(t, args...)
	const warned = "fetch failed: the gateway did not answer"
	hint := "no answer from " + proxy.Addr() + " within"
	eventually(t, 90*time.Second, "the first outage's warning, with the hint", func() (bool, string) {
		if ok, why := p.running(); !ok {
			t.Fatal(why)
		}
		return strings.Contains(p.stderr.String(), hint), p.stderr.String()
	})
	proxy.Heal()
	run(t, time.Minute, "back\n", d.produceArgs("--partition", "3")...)
	eventually(t, 90*time.Second, "the record fetched through the healed gateway", func() (bool, string) {
		return strings.Contains(p.stdout.String(), `"partition":3`), p.stdout.String()
	})
	warnings := strings.Count(p.stderr.String(), warned)
	proxy.Blackhole()
	eventually(t, 90*time.Second, "a warning of the second outage", func() (bool, string) {
		if ok, why := p.running(); !ok {
			t.Fatal(why)
		}
		return strings.Count(p.stderr.String(), warned) > warnings, p.stderr.String()
	})
	proxy.Heal()
	p.interrupt(t)
	stderr := p.stderr.String()
	if n := strings.Count(stderr, hint); n != 2 {
		t.Fatalf("the hint %d times, want twice (once per outage):\n%s", n, stderr)
	}
	for _, line := range strings.Split(stderr, "\n") {
		if strings.Contains(line, hint) && !strings.Contains(line, warned) {
			t.Fatalf("a hint not on a warning: %s", line)
		}
	}
}

// gatewayProxy is a proxy to d's gateway the test can silence
// (Blackhole) and heal, closed when the test ends.
func gatewayProxy(t *testing.T, d *devProcess) *stack.Proxy {
	t.Helper()
	gw, err := url.Parse(d.gateway)
	if err != nil {
		t.Fatal(err)
	}
	proxy, err := stack.StartProxy(gw.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { proxy.Close() })
	return proxy
}
