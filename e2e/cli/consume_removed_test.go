package cli_test

import (
	"strings"
	"testing"
	"time"
)

// TestConsumeSaysWhenAnAdministratorRevokedIt: `capgate admin
// revoke-member` on a running `capgate consume` makes it join again, as
// Kafka's consumers do after RemoveMembersFromConsumerGroup — and it
// says so at its default log level (warn), naming the command that does
// stop it: revoke-capability with its credential's jti. Following that
// advice stops it (exit 1, token denied). Before, the rejoin was
// silent (an info line), and an operator took the consumer for gone.
func TestConsumeSaysWhenAnAdministratorRevokedIt(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	jti, _ := tokenClaims(t, d.credentials(t).ClientCredential)["jti"].(string)
	if jti == "" {
		t.Fatal("the dev client credential has no jti")
	}
	p := startConsume(t, d.consumeArgs("removed")...)
	var first string
	eventually(t, 30*time.Second, "the consumer joined", func() (bool, string) {
		if ok, why := p.running(); !ok {
			return false, why
		}
		var g groupView
		if d.admin(t, "GET", "/v1/admin/groups/removed", &g) != 200 || len(g.Members) != 1 {
			return false, "no member yet"
		}
		first = g.Members[0].ID
		return true, ""
	})
	d.adminCLI(t, "revoke-member", "removed", first, "--reason", "first-day test")
	want := "member revoked by an administrator: joining again"
	eventually(t, 30*time.Second, "the consumer said it was revoked and joined again", func() (bool, string) {
		if ok, why := p.running(); !ok {
			return false, why
		}
		g := d.group(t, "removed")
		if len(g.Members) != 1 || g.Members[0].ID == first || !strings.Contains(p.stderr.String(), want) {
			return false, "members " + strings.Join(memberIDs(g), ",") + " (the revoked one: " + first + ")" + "; stderr:\n" + p.stderr.String()
		}
		return true, ""
	})
	stderr := p.stderr.String()
	if !strings.Contains(stderr, "WARN") || !strings.Contains(stderr, "capgate admin revoke-capability "+jti) {
		t.Fatalf("the warning does not name revoke-capability %s:\n%s", jti, stderr)
	}
	if strings.Count(stderr, want) != 1 {
		t.Errorf("the revocation is reported %d times, want once:\n%s", strings.Count(stderr, want), stderr)
	}

	d.adminCLI(t, "revoke-capability", jti, "--reason", "stop it")
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("consume still runs after its credential was revoked:\n%s", p.stderr.String())
	}
	if p.err == nil || p.cmd.ProcessState.ExitCode() != 1 || !strings.Contains(p.stderr.String(), "denied") {
		t.Fatalf("consume exited %v after its credential was revoked, want a failure saying it was denied:\n%s", p.err, p.stderr.String())
	}
	t.Logf("consume's stderr:\n%s", p.stderr.String())
	d.stop(true)
}

func memberIDs(g groupView) []string {
	ids := make([]string, len(g.Members))
	for i, m := range g.Members {
		ids[i] = m.ID
	}
	return ids
}
