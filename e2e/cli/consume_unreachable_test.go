package cli_test

import (
	"strings"
	"testing"
	"time"
)

// TestConsumeGivesUpOnGatewaysThatNeverAnswered: `capgate consume`
// whose --gateways name nothing that answers retried for ever (a warning
// every 10 s), where produce gives up after request_timeout. It exits 1
// after --unreachable-exit (10 s) saying no gateway answered and which
// flag to check, and leaves its group. A consumer a gateway has answered
// rides out a later outage longer than that: it is a blip, not a wrong
// flag.
func TestConsumeGivesUpOnGatewaysThatNeverAnswered(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	closed := closedPort(t)

	args := d.consumeArgs("deadgw")
	args[len(args)-1] = "http://" + closed // --gateways
	began := time.Now()
	_, stderr := runFailing(t, 60*time.Second, args...)
	took := time.Since(began)
	if !strings.Contains(stderr, "no gateway answered a fetch in --unreachable-exit 10s (http://"+closed+")") ||
		!strings.Contains(stderr, "nothing listens at "+closed) {
		t.Fatalf("consume with --gateways naming nothing, stderr:\n%s\nwant it to say no gateway answered in --unreachable-exit 10s, and why", stderr)
	}
	if took < 10*time.Second {
		t.Fatalf("gave up after %s, before --unreachable-exit 10s", took)
	}
	if g := d.group(t, "deadgw"); len(g.Members) != 0 {
		t.Fatalf("the consumer that gave up is still a member: %+v", g.Members)
	}

	// Answered once, then silent for longer than --unreachable-exit:
	// still consuming.
	proxy := gatewayProxy(t, d)
	args = d.consumeArgs("blip", "--unreachable-exit", "2s")
	args[len(args)-3] = proxy.URL()
	p := startConsume(t, args...)
	run(t, time.Minute, "before\n", d.produceArgs("--partition", "1")...)
	eventually(t, 90*time.Second, "the record fetched", func() (bool, string) {
		return strings.Contains(p.stdout.String(), `"partition":1`), p.stdout.String()
	})
	proxy.Blackhole()
	const warned = "fetch failed: the gateway did not answer"
	eventually(t, 90*time.Second, "a warning of the outage", func() (bool, string) {
		if ok, why := p.running(); !ok {
			t.Fatal(why)
		}
		return strings.Contains(p.stderr.String(), warned), p.stderr.String()
	})
	if ok, why := p.running(); !ok { // the warning came a request_timeout (10 s) into the outage
		t.Fatalf("a consumer that had read gave up in an outage: %s", why)
	}
	proxy.Heal()
	p.interrupt(t)
}
