package cli_test

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/internal/coordinators/coordinatorstest"
)

// TestFirstDayMistakes runs what a new user types on the first day and
// gets wrong, against `capgate dev`: each must fail loudly (non-zero,
// saying why) or do what its help says.
func TestFirstDayMistakes(t *testing.T) {
	t.Parallel()
	d := startDev(t, t.TempDir())
	run(t, 20*time.Second, "a\nb\n", d.produceArgs("--partition", "2")...)

	// The console opened at the gateway's address (8080 beside 7070 in
	// capgate dev's banner), a join sent there: a 404 listing the
	// gateway's routes (newuser7). It says the route is the
	// coordinator's, without telling the coordinator's URL.
	t.Run("coordinator_routes_at_the_gateway", func(t *testing.T) {
		for _, c := range []struct{ method, path string }{
			{"GET", "/console"}, {"GET", "/console/groups"}, {"POST", "/v1/groups/g/join"}, {"GET", "/v1/admin/groups"}, {"POST", "/oauth/token"},
		} {
			req, _ := http.NewRequest(c.method, d.gateway+c.path, nil)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound || !strings.Contains(string(body), "this is the coordinator's (the console, groups, admin, OAuth, keys), not a gateway's") ||
				strings.Contains(string(body), d.coordinator) {
				t.Errorf("%s %s at the gateway: %d %s", c.method, c.path, resp.StatusCode, body)
			}
		}
		resp, err := http.Get(d.gateway + "/consoles")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), "a gateway serves") {
			t.Errorf("GET /consoles at the gateway: %s, want the gateway's routes", body)
		}
	})

	// A credential handed over for one group, used for another:
	// "client credential does not allow group g2" and no more — which
	// group it was for was in the token (newuser7). The refusal names
	// what it allows, exit 1, and the join once.
	t.Run("credential_for_another_group", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "svc.json")
		writeFile(t, file, d.adminCLI(t, "client-credential", "--name", "svc", "--groups", "g1,orders-*", "--topics", "demo"))
		for _, c := range []struct{ group, topic, want string }{
			{"g2", "demo", "client credential does not allow group g2: it allows groups g1, orders-* (capgate admin client-credential --groups mints one for others)"},
			{"g1", "other", "client credential does not allow topic other: it allows topics demo (capgate admin client-credential --topics mints one for others)"},
		} {
			_, stderr, err := cliResult(t, "consume", "--group", c.group, "--topic", c.topic, "--credential-file", file,
				"--coordinator", d.coordinator, "--gateways", d.gateway, "--idle-exit", "5s")
			var exit *exec.ExitError
			if !errors.As(err, &exit) || exit.ExitCode() != 1 || !strings.Contains(stderr, c.want) {
				t.Errorf("consume --group %s --topic %s with a credential for g1: %v, stderr:\n%s\nwant exit 1 and %q", c.group, c.topic, err, stderr, c.want)
			}
			// The operation once: "consume: join g2: client: join:
			// forbidden ..." said it twice (newuser11).
			if want := "capgate: consume: join " + c.group + ": forbidden (403): "; !strings.Contains(stderr, want) || strings.Count(stderr, "join") != 1 {
				t.Errorf("consume --group %s refused, stderr:\n%s\nwant %q, naming the join once", c.group, stderr, want)
			}
		}
	})

	// A credential that ran out (a short --ttl, one kept from last
	// month): "client credential expired: exp …, 3s ago" and not where a
	// fresh one comes from (newuser8). Exit 1.
	t.Run("expired_credential", func(t *testing.T) {
		file := filepath.Join(t.TempDir(), "short.json")
		writeFile(t, file, d.adminCLI(t, "client-credential", "--name", "short", "--groups", "g1", "--topics", "demo", "--ttl", "1s"))
		want := "client credential expired: exp "
		hint := ": use a fresh one (capgate admin client-credential mints one, with a --ttl of its lifetime; an OAuth client's comes from POST /oauth/token)"
		var stderr string
		deadline := time.Now().Add(time.Minute)
		for !strings.Contains(stderr, want) && time.Now().Before(deadline) { // past its exp and the coordinator's leeway
			var err error
			_, stderr, err = cliResult(t, "consume", "--group", "g1", "--topic", "demo", "--credential-file", file,
				"--coordinator", d.coordinator, "--gateways", d.gateway, "--idle-exit", "1s")
			var exit *exec.ExitError
			if strings.Contains(stderr, want) && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
				t.Fatalf("an expired credential: %v, want exit 1", err)
			}
		}
		if !strings.Contains(stderr, want) || !strings.Contains(stderr, hint) {
			t.Errorf("consume with an expired credential, stderr:\n%s\nwant %q … %q", stderr, want, hint)
		}
	})

	// `consume --gateways` naming an address where nothing listens,
	// with --idle-exit: the SDK retries the fetches, so before, nothing
	// was printed (not even at --log-level debug) and --idle-exit ended
	// it with exit 0, as if the partitions were merely empty.
	t.Run("consume_unreachable_gateway", func(t *testing.T) {
		dead := coordinatorstest.Down(t) // refused, and the port stays this test's
		args := []string{"consume", "--group", "deadgw", "--topic", "demo", "--format", "json",
			"--credential-file", filepath.Join(d.dataDir, "credentials.json"),
			"--coordinator", d.coordinator, "--gateways", dead, "--idle-exit", "2s"}
		_, stderr := runFailing(t, 30*time.Second, args...)
		if !strings.Contains(stderr, "no gateway answered") || !strings.Contains(stderr, "connection refused") ||
			!strings.Contains(stderr, "fetch failed: the gateway did not answer") {
			t.Fatalf("stderr does not say the gateway did not answer:\n%s", stderr)
		}
		if g := d.group(t, "deadgw"); len(g.Members) != 0 {
			t.Fatalf("the failed consumer is still a member: %+v", g.Members)
		}
	})

	// The same with a gateway that answers and nothing to read: idle,
	// exit 0.
	t.Run("consume_idle_exits_zero", func(t *testing.T) {
		run(t, 30*time.Second, "", d.consumeArgs("idle", "--max-records", "2")...)
		if out := run(t, 30*time.Second, "", d.consumeArgs("idle", "--idle-exit", "1s")...); out != "" {
			t.Fatalf("an idle group printed %q", out)
		}
	})

	// `admin offsets GROUP` — "Committed offsets of a group" — refused
	// GROUP as an unknown command; nothing listed a group's committed
	// offsets.
	t.Run("admin_offsets_group", func(t *testing.T) {
		var got api.OffsetsResponse
		d.adminJSON(t, &got, "offsets", "idle")
		found := false
		for _, o := range got.Offsets {
			found = found || (o.Topic == "demo" && o.Partition == 2 && o.Offset == 2)
		}
		if !found {
			raw, _ := json.Marshal(got)
			t.Fatalf("admin offsets idle: %s, want demo/2 at 2", raw)
		}
		table := d.adminCLI(t, "offsets", "idle", "-o", "table")
		mustMatch(t, "admin offsets -o table", table, `(?m)^TOPIC\s+PARTITION\s+OFFSET\s+METADATA$`, `(?m)^demo\s+2\s+2\s+-$`)
		if _, stderr := runFailing(t, 30*time.Second, d.adminArgs("offsets")...); !strings.Contains(stderr, "admin offsets: want GROUP, got none") {
			t.Fatalf("admin offsets without a group: %s", stderr)
		}
		// A mistyped group printed an empty table and exited 0 (the
		// route answers an unknown group with no offsets, as Kafka's
		// OffsetFetch): newuser5.
		if _, stderr := runFailing(t, 30*time.Second, d.adminArgs("offsets", "idel")...); !strings.Contains(stderr, "404 not_found: unknown group idel") {
			t.Fatalf("admin offsets of an unknown group: %s", stderr)
		}
	})

	// `consume --topic-pattern '^de'` (a prefix, as kcat's -G '^de'
	// means) matches no topic — the coordinator matches the whole name —
	// and the consumer waited with no partition, saying nothing, at any
	// log level (newuser4 #15). The join's answer now counts the matches
	// and the SDK warns, naming the pattern that would match.
	t.Run("consume_topic_pattern_matching_nothing", func(t *testing.T) {
		args := []string{"consume", "--group", "prefix", "--topic-pattern", "^de", "--format", "json",
			"--credential-file", filepath.Join(d.dataDir, "credentials.json"),
			"--coordinator", d.coordinator, "--gateways", d.gateway, "--idle-exit", "1s"}
		stdout, stderr, err := cliResult(t, args...)
		if err != nil || stdout != "" {
			t.Fatalf("consume --topic-pattern '^de': %v, stdout %q, stderr %s", err, stdout, stderr)
		}
		if !strings.Contains(stderr, "topic pattern matches no topic") || !strings.Contains(stderr, `use "de.*"`) {
			t.Fatalf("consume --topic-pattern '^de' did not warn that it matches nothing:\n%s", stderr)
		}
		args[4] = "de.*"
		if _, stderr, err := cliResult(t, args...); err != nil || strings.Contains(stderr, "matches no topic") {
			t.Fatalf("consume --topic-pattern 'de.*': %v, stderr %s", err, stderr)
		}
	})

	// `capgate topic describe demo` (rpk's words) was "unknown command"
	// and there was no way to ask what a topic is. Now admin topic
	// describes it and the root points there.
	t.Run("topic_describe", func(t *testing.T) {
		_, stderr := runFailing(t, 30*time.Second, "topic", "describe", "demo")
		if !strings.Contains(stderr, "did you mean capgate admin topic?") {
			t.Fatalf("capgate topic describe demo: %s", stderr)
		}
		var got struct {
			Topic      string `json:"topic"`
			Partitions []struct {
				Partition int32 `json:"partition"`
				Earliest  int64 `json:"earliest_offset"`
				Latest    int64 `json:"latest_offset"`
			} `json:"partitions"`
		}
		d.adminJSON(t, &got, "topic", "describe", "demo")
		if got.Topic != "demo" || len(got.Partitions) != 12 || got.Partitions[2].Latest != 2 {
			t.Fatalf("admin topic describe demo: %+v, want 12 partitions, demo/2 ending at 2", got)
		}
		table := d.adminCLI(t, "topics", "-o", "table")
		mustMatch(t, "admin topics -o table", table, `(?m)^TOPIC\s+PARTITIONS$`, `(?m)^demo\s+12$`)
		if _, stderr := runFailing(t, 30*time.Second, d.adminArgs("topic", "nosuch")...); !strings.Contains(stderr, `404 not_found: unknown topic "nosuch"`) {
			t.Fatalf("admin topic nosuch: %s", stderr)
		}
	})
	// `consume --gateways` naming a Kafka port (capgate dev's broker,
	// which takes an HTTP request and never answers; the Kafka listener,
	// which closes it) with an --idle-exit shorter than request_timeout:
	// the broker's exited 0 as if idle — its fetches were still in
	// flight — and the listener's said "connection reset by peer" bare
	// (newuser6). Both exit 1 saying which flag to fix.
	t.Run("consume_gateways_kafka_port", func(t *testing.T) {
		listener := listenerAddr.FindStringSubmatch(d.stdout.String())
		if listener == nil {
			t.Fatalf("capgate dev printed no kafka listener:\n%s", d.stdout.String())
		}
		for _, c := range []struct{ addr, want string }{
			{d.broker, "no answer from " + d.broker + " within 10s, where a gateway answers at once"},
			{listener[1], listener[1] + " closed the connection without an HTTP answer: is it a Kafka port"},
		} {
			args := []string{"consume", "--group", "kafkaport", "--topic", "demo",
				"--credential-file", filepath.Join(d.dataDir, "credentials.json"),
				"--coordinator", d.coordinator, "--gateways", "http://" + c.addr, "--idle-exit", "8s"} // below request_timeout, 10s; above the grants' wait under load
			_, stderr := runFailing(t, 60*time.Second, args...)
			if !strings.Contains(stderr, c.want) || !strings.Contains(stderr, "--gateways or CAPGATE_GATEWAY_URLS") {
				t.Errorf("consume --gateways http://%s: %s, want %q and the flag", c.addr, stderr, c.want)
			}
		}
	})

	// Without --idle-exit, and with --unreachable-exit 0 (the default
	// gives up after 10 s), the SDK retries such a gateway for as long as
	// consume runs, warning every 10 s with the bare transport error
	// ("connection reset by peer"; newuser6's left): the first warning
	// now says which flag to fix, and only the first — the next ones
	// repeat the error, not the hint.
	t.Run("consume_gateways_kafka_port_retrying", func(t *testing.T) {
		listener := listenerAddr.FindStringSubmatch(d.stdout.String())
		if listener == nil {
			t.Fatalf("capgate dev printed no kafka listener:\n%s", d.stdout.String())
		}
		p := startConsume(t, "consume", "--group", "kafkaportretry", "--topic", "demo",
			"--credential-file", filepath.Join(d.dataDir, "credentials.json"),
			"--coordinator", d.coordinator, "--gateways", "http://"+listener[1], "--unreachable-exit", "0")
		const warned = "fetch failed: the gateway did not answer"
		eventually(t, 90*time.Second, "a second warning of the failing gateway (10 s after the first)", func() (bool, string) {
			if ok, why := p.running(); !ok {
				t.Fatal(why)
			}
			return strings.Count(p.stderr.String(), warned) >= 2, p.stderr.String()
		})
		p.interrupt(t)
		stderr := p.stderr.String()
		hint := listener[1] + " closed the connection without an HTTP answer: is it a Kafka port"
		if n := strings.Count(stderr, hint); n != 1 || !strings.Contains(stderr, "--gateways or CAPGATE_GATEWAY_URLS") {
			t.Fatalf("consume --gateways http://%s: the hint %d times, want once with the flag:\n%s", listener[1], n, stderr)
		}
		if first := strings.Index(stderr, warned); !strings.Contains(stderr[first:strings.Index(stderr[first:], "\n")+first], hint) {
			t.Fatalf("the hint is not on the first warning:\n%s", stderr)
		}
	})

	// The wrong token, or the right one without "Bearer ": curl's
	// -H "Authorization: $CAPGATE_ADMIN_TOKEN" got "admin token required",
	// the client credential as admin token "not a known admin token"
	// (newuser6). Each now says what was sent and what is wanted.
	t.Run("admin_route_wrong_token", func(t *testing.T) {
		creds := d.credentials(t)
		for _, c := range []struct{ header, want string }{
			{"Authorization: " + creds.AdminToken, `admin token required: the Authorization header must be 'Bearer ' followed by the admin token`},
			{"Authorization: Bearer " + creds.ClientCredential, `admin token refused: this is a client credential, not an admin token`},
			{"Authorization: Bearer " + creds.SyncToken, `admin token refused: this is a sync token, not an admin token`},
		} {
			out, err := exec.Command("curl", "-sS", d.coordinator+"/v1/admin/groups", "-H", c.header).CombinedOutput()
			if err != nil || !strings.Contains(string(out), c.want) {
				t.Errorf("curl -H %.30q...: %v %s, want %q", c.header, err, out, c.want)
			}
		}
		out, err := exec.Command("curl", "-sS", "-X", "POST", d.coordinator+"/v1/groups/g/join", "-H", "Authorization: "+creds.ClientCredential,
			"-d", `{"topics":["demo"]}`).CombinedOutput()
		if want := `client credential required: the Authorization header must be 'Bearer ' followed by the client credential`; err != nil || !strings.Contains(string(out), want) {
			t.Errorf("a join without Bearer: %v %s, want %q", err, out, want)
		}
		if _, stderr := runFailing(t, 30*time.Second, "admin", "groups", "--coordinator", d.coordinator, "--token", creds.ClientCredential); !strings.Contains(stderr, "this is a client credential, not an admin token") {
			t.Errorf("admin groups --token CLIENT_CREDENTIAL: %s", stderr)
		}
	})

	// curl -d without -H 'Content-Type: application/json' sends a form:
	// 415 "request body must be Content-Type: application/json" said
	// what was wrong, not the flag that fixes it (newuser11). Both the
	// coordinator's join and the gateway's produce name it.
	t.Run("curl_post_without_content_type", func(t *testing.T) {
		creds := d.credentials(t)
		var w struct {
			Credential string `json:"client_credential"`
		}
		d.adminJSON(t, &w, "client-credential", "--name", "writer", "--groups", "w", "--topics", "demo", "--ops", "consume,produce")
		for _, c := range []struct{ url, bearer, body string }{
			{d.coordinator + "/v1/groups/g/join", creds.ClientCredential, `{"topics":["demo"]}`},
			{d.gateway + "/v1/topics/demo/partitions/0/records", w.Credential, `{"records":[{"value":"eA=="}]}`},
		} {
			out, err := exec.Command("curl", "-sS", "-X", "POST", c.url, "-H", "Authorization: Bearer "+c.bearer, "-d", c.body, "-w", "\nHTTP %{http_code}").CombinedOutput()
			want := `not \"application/x-www-form-urlencoded\" (curl -d sends that: add -H 'Content-Type: application/json')`
			if err != nil || !strings.Contains(string(out), want) || !strings.HasSuffix(string(out), "HTTP 415") {
				t.Errorf("curl -d to %s without a Content-Type: %v %s, want 415 and %s", c.url, err, out, want)
			}
		}
	})
	d.stop(true)
}
