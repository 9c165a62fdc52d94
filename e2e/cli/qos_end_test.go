package cli_test

import (
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestQoSEndLiftsTheThrottle: an operator who slowed a group down as
// README's walk-through does (`capgate admin qos --group G
// --max-bytes-per-sec N`) lifts it with `capgate admin qos end --group
// G`: qos list no longer shows it, and a consumer of the group then
// reads 30 KB at once, never refused rate_limited — at 1000 B/s it would
// take half a minute. There was no way but waiting out its --ttl (1h)
// or knowing that a PUT of ttl_ms 1 ends it (newuser4 #5). Ending an
// override that is not in force (a selector mistyped) is an error, not
// a new override.
func TestQoSEndLiftsTheThrottle(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	const n = 300
	d.produceBatches(t, 4, n)
	d.adminCLI(t, "qos", "--group", "lifted", "--max-bytes-per-sec", "1000")
	ended := d.adminCLI(t, "qos", "end", "--group", "lifted", "-o", "table")
	mustMatch(t, "qos end -o table", ended, `ID\s+SELECTOR\s+LOG-LEVEL`, `group=lifted\s+-\s+-\s+1000\s`)

	var list struct {
		Overrides []map[string]any `json:"overrides"`
	}
	d.adminJSON(t, &list, "qos", "list")
	if len(list.Overrides) != 0 {
		t.Fatalf("qos list after qos end: %v, want none", list.Overrides)
	}
	_, stderr, err := cliResult(t, d.adminArgs("qos", "end", "--group", "lifted")...)
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr, `no QoS override in force for selector {"group":"lifted"}`) {
		t.Fatalf("qos end of an override no longer in force: %v, stderr %q; want exit 1 saying none is in force", err, stderr)
	}
	eventually(t, 20*time.Second, "the gateway applied the end", func() (bool, string) {
		var gws struct {
			Seq      uint64 `json:"seq"`
			Gateways []struct {
				AckedSeq uint64 `json:"acked_seq"`
			} `json:"gateways"`
		}
		d.adminJSON(t, &gws, "gateways")
		return len(gws.Gateways) == 1 && gws.Gateways[0].AckedSeq >= gws.Seq, fmt.Sprintf("%+v", gws)
	})

	if stderr := d.consumeAll(t, "lifted", n, 20*time.Second); strings.Contains(stderr, "rate_limited") {
		t.Fatalf("a fetch was refused rate_limited after qos end:\n%s", stderr)
	}
	d.stop(true)
}
