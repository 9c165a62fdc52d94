package coordinator_test

import (
	"context"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
)

// TestHeartbeatWhoseGrantsFailIsLogged: when minting the grants a held
// heartbeat carries fails (here the minter's entropy source fails after
// both members joined), the heartbeat answers 500 internal "mint
// grants" and the cause is logged at ERROR naming the group, the member
// and the error — before, only the join's 500 said why — and no token
// reaches the logs.
func TestHeartbeatWhoseGrantsFailIsLogged(t *testing.T) {
	e := newEnv(t, map[string]int32{"demo": 2})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	c, err := coordinator.New(e.cfg, e.log, coordinator.WithListener(ln), coordinator.WithBroker(e.broker),
		coordinator.WithRand(rand.New(rand.NewPCG(1, 7))))
	if err != nil {
		t.Fatal(err)
	}
	breakMinting, err := coordinator.SwitchMinting(c)
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{env: e, c: c, base: c.URL(), done: make(chan error, 1), client: &http.Client{Timeout: 30 * time.Second}}
	go func() { h.done <- c.Run(context.Background()) }()
	t.Cleanup(func() { h.stop(t) })
	gw := newGateway(h, "gw1")
	gw.run(500)
	t.Cleanup(gw.halt)

	cred := h.clientCredential(t, []string{"g"}, []string{"demo"})
	a := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"demo"}, ClientID: "a"})
	b := h.join(t, "g", cred, api.JoinRequest{Topics: []string{"demo"}, ClientID: "b"})
	revoke := a.heartbeat(t, 5000).Revoke // one partition moves to b
	if len(revoke) != 1 {
		t.Fatalf("a's heartbeat after b joined revokes %v, want one partition", revoke)
	}
	breakMinting()
	held := b.heldHeartbeat(10_000) // answered with b's grant once a released it
	a.releaseAll(t, revoke, func(api.PartitionRef) int64 { return 0 })
	r := <-held
	if r.err == nil || !strings.Contains(r.err.Error(), "500") || !strings.Contains(r.err.Error(), `"mint grants"`) {
		t.Fatalf("b's heartbeat carrying a grant that cannot be minted: %+v %v, want 500 internal \"mint grants\"", r.resp, r.err)
	}
	logged := e.logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("heartbeat").All()
	if len(logged) != 1 {
		t.Fatalf("%d ERROR lines for the failed heartbeat, want 1: %+v", len(logged), e.logs.All())
	}
	fields := logged[0].ContextMap()
	if fields["group"] != "g" || fields["member_id"] != b.id || !strings.Contains(fields["error"].(string), "entropy source failed") {
		t.Fatalf("ERROR line %q %v does not name the group, the member and the cause", logged[0].Message, fields)
	}
	e.checkLogs(t)
}
