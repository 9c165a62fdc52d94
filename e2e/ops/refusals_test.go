package ops_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap/zaptest/observer"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/e2e/harness"
	"github.com/capgate/capgate/internal/refusallog"
	"github.com/capgate/capgate/internal/stack"
)

// TestWrongSyncTokenRefusedWithoutALog is issue #13's "a wrong sync token
// is refused with no log line at the coordinator" (nor was a wrong admin
// token logged). Sync polls and admin calls with wrong, missing and
// foreign tokens, over real HTTP, are refused 401 as before and now
// logged at the coordinator: what was refused, why, the route, the
// caller and the gateway id it claimed — never the token; and a flood of
// them logs a bounded burst, the rest counted as suppressed.
func TestWrongSyncTokenRefusedWithoutALog(t *testing.T) {
	t.Parallel()
	o := startOps(t, map[string]int32{"r": 1})
	ctx := context.Background()
	coordinatorURL := o.s.CoordinatorURL()
	wrong := "wrong-sync-token-0123456789abcdef"
	status, _, err := stack.DoJSON(ctx, o.s.HTTP(), http.MethodGet, coordinatorURL+"/v1/sync?gateway=rogue-gw&after=0&wait_ms=0", wrong, nil, nil)
	if err != nil || status != http.StatusUnauthorized {
		t.Fatalf("wrong sync token: %d %v", status, err)
	}
	status, _, err = stack.DoJSON(ctx, o.s.HTTP(), http.MethodGet, coordinatorURL+"/v1/admin/groups", o.s.SyncToken, nil, nil)
	if err != nil || status != http.StatusUnauthorized {
		t.Fatalf("the sync token as admin token: %d %v", status, err)
	}
	status, _, err = stack.DoJSON(ctx, o.s.HTTP(), http.MethodGet, coordinatorURL+"/v1/admin/groups", "", nil, nil)
	if err != nil || status != http.StatusUnauthorized {
		t.Fatalf("no admin token: %d %v", status, err)
	}
	syncLine := o.logs.FilterMessage("sync token refused").All()
	if len(syncLine) != 1 || syncLine[0].ContextMap()["gateway"] != "rogue-gw" || syncLine[0].ContextMap()["reason"] != "not a known sync token" ||
		syncLine[0].ContextMap()["route"] != "/v1/sync" || syncLine[0].ContextMap()["remote"] == "" {
		t.Fatalf("sync refusal log: %v", contexts(syncLine))
	}
	adminLines := o.logs.FilterMessage("admin token refused").All()
	if len(adminLines) != 2 || adminLines[0].ContextMap()["reason"] != "not a known admin token" || adminLines[1].ContextMap()["reason"] != "no bearer token" {
		t.Fatalf("admin refusal logs: %v", contexts(adminLines))
	}

	for i := range 200 {
		status, _, err := stack.DoJSON(ctx, o.s.HTTP(), http.MethodGet, fmt.Sprintf("%s/v1/sync?gateway=flood-%d&after=0&wait_ms=0", coordinatorURL, i), wrong, nil, nil)
		if err != nil || status != http.StatusUnauthorized {
			t.Fatalf("flood %d: %d %v", i, status, err)
		}
	}
	flood := o.logs.FilterMessage("sync token refused").Len() - 1
	if flood > refusallog.Burst+5 { // the burst, and a line a second while the flood lasts
		t.Fatalf("200 refused polls logged %d lines, want about the burst of %d", flood, refusallog.Burst)
	}
	for _, e := range o.logs.All() {
		line := e.Message + fmt.Sprint(e.ContextMap())
		for _, secret := range []string{wrong, o.s.SyncToken, o.s.AdminToken} {
			if strings.Contains(line, secret) {
				t.Fatalf("a token in the log: %s", line)
			}
		}
	}
}

func contexts(entries []observer.LoggedEntry) []map[string]any {
	var out []map[string]any
	for _, e := range entries {
		out = append(out, e.ContextMap())
	}
	return out
}

// TestExpiredTokenErrorsShowEpochSeconds is issue #13's "expired-token
// errors show raw epoch seconds": a fetch with an expired capability is
// refused 401 token_expired, and its message gives the expiry in RFC 3339
// with how long ago, not a unix time.
func TestExpiredTokenErrorsShowEpochSeconds(t *testing.T) {
	t.Parallel()
	o := startOpsWith(t, map[string]int32{"x": 1}, opsOptions{gateways: 1, coordinator: func(cfg *coordinator.Config) { cfg.Leeway = 0 }})
	capability, exp := sharedCapability(t, o, "x", 0, time.Second)
	var refusal api.ErrorBody
	harness.Eventually(t, 20*time.Second, "the capability's lease to end", func() (bool, string) {
		a := fetch(t, o, capability, "x", 0, 0, false)
		if a.status != http.StatusUnauthorized {
			return false, fmt.Sprintf("%d %s", a.status, a.body)
		}
		return json.Unmarshal(a.body, &refusal) == nil, string(a.body)
	})
	msg := refusal.Error.Message
	if refusal.Error.Code != api.CodeTokenExpired || !strings.Contains(msg, exp.UTC().Format(time.RFC3339)) || !regexp.MustCompile(`[0-9]+s ago`).MatchString(msg) {
		t.Fatalf("expired capability: %s %q, want token_expired naming %s and how long ago", refusal.Error.Code, msg, exp.UTC().Format(time.RFC3339))
	}
	if regexp.MustCompile(`\b1[0-9]{9}\b`).MatchString(msg) {
		t.Fatalf("epoch seconds in %q", msg)
	}
}
