package coordinator_test

import (
	"strings"
	"testing"

	"go.uber.org/zap/zapcore"
)

// TestHeartbeatWhoseGrantsFailIsLogged: when minting the grants a held
// heartbeat carries fails (here the minter's entropy source fails after
// both members joined), the heartbeat answers 500 internal "mint
// grants" and the cause is logged at ERROR naming the group, the member
// and the error — before, only the join's 500 said why — and whether
// the news went back for the next heartbeat (news_kept); no token
// reaches the logs.
func TestHeartbeatWhoseGrantsFailIsLogged(t *testing.T) {
	h, setBroken, a, b, moved := startToggled(t, nil)
	e := h.env
	loseGrantToMint(t, setBroken, a, b, moved)
	logged := e.logs.FilterLevelExact(zapcore.ErrorLevel).FilterMessageSnippet("heartbeat").All()
	if len(logged) != 1 {
		t.Fatalf("%d ERROR lines for the failed heartbeat, want 1: %+v", len(logged), e.logs.All())
	}
	fields := logged[0].ContextMap()
	if fields["group"] != "g" || fields["member_id"] != b.id || !strings.Contains(fields["error"].(string), "entropy source failed") || fields["news_kept"] != true {
		t.Fatalf("ERROR line %q %v does not name the group, the member and the cause, or the news kept", logged[0].Message, fields)
	}
	e.checkLogs(t)
}
