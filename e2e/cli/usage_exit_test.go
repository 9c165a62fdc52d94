package cli_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
)

// TestEveryUsageErrorExitsTwo: the real binary exits 2, with a message
// naming the fix, for each command-line mistake that exited 1 (redteam4
// item 7): an unknown top-level command (cobra's root check), a missing
// required flag (cobra's MarkFlagRequired check), a bad argument, a
// hand-checked required flag. Nothing listens at the URLs given: each is
// refused before anything is sent.
func TestEveryUsageErrorExitsTwo(t *testing.T) {
	t.Parallel()
	const nowhere = "http://127.0.0.1:1"
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bogus"}, `unknown command "bogus" for "capgate" (see capgate --help)`},
		{[]string{"consme"}, "did you mean consume?"},
		{[]string{"consume", "--topic", "demo", "--credential", "x", "--coordinator", nowhere, "--gateways", nowhere}, "--group is required (see capgate consume --help)"},
		{[]string{"admin", "revoke", "gp1", "demo", "x", "--token", "x", "--coordinator", nowhere}, `partition "x": want a number ≥ 0`},
		{[]string{"admin", "lease", "gp1", "demo", "0", "--ttl", "100h", "--token", "x", "--coordinator", nowhere}, "--holder is required (see capgate admin lease --help)"},
		{[]string{"admin", "grant", "--topic", "demo", "--token", "x", "--coordinator", nowhere}, "--holder, --partition are required (see capgate admin grant --help)"},
		{[]string{"produce", "--partition", "0", "--capability", "x", "--gateways", nowhere}, "--topic is required (see capgate produce --help)"},
		// It said "--name and --groups are required" whichever was missing, and no --help.
		{[]string{"admin", "client-credential", "--name", "svc", "--token", "x", "--coordinator", nowhere}, "--groups is required (see capgate admin client-credential --help)"},
		{[]string{"admin", "oauth-client", "create", "--groups", "g", "--token", "x", "--coordinator", nowhere}, "--name, --topics are required (see capgate admin oauth-client create --help)"},
		{[]string{"admin", "offsets", "reset", "gp1", "demo", "--token", "x", "--coordinator", nowhere}, "--to is required"},
		// It said the SDK's words: "set exactly one of Topics and TopicPattern (topic_pattern)".
		{[]string{"consume", "-g", "g", "-t", "demo", "--topic-pattern", "de.*", "--credential", "x", "--coordinator", nowhere, "--gateways", nowhere}, "--topic and --topic-pattern: give one"},
	} {
		_, stderr, err := cliResult(t, c.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("capgate %s: %v, stderr %q; want exit status 2 and %q", strings.Join(c.args, " "), err, stderr, c.want)
		}
	}
}

// TestGroupNameRefusedBeforeJoin: `capgate consume --group a/b` is refused
// with exit 2 and the coordinator's naming rule before anything is sent;
// it reached the coordinator as /v1/groups/a/b/join and came back as a
// 404 "no such route" (redteam4 item 8). The coordinator here is an HTTP
// server that counts what reaches it; the admin commands that name a
// group likewise.
func TestGroupNameRefusedBeforeJoin(t *testing.T) {
	t.Parallel()
	coordinator, requests := countingServer(t)
	for _, args := range [][]string{
		{"consume", "--group", "a/b", "--topic", "demo", "--credential", "x", "--coordinator", coordinator.URL, "--gateways", coordinator.URL},
		{"consume", "--group", "my group", "--topic", "demo", "--credential", "x", "--coordinator", coordinator.URL, "--gateways", coordinator.URL},
		{"consume", "--group", "café", "--topic", "demo", "--credential", "x", "--coordinator", coordinator.URL, "--gateways", coordinator.URL},
		{"admin", "lease", "a/b", "demo", "0", "--holder", "h", "--token", "x", "--coordinator", coordinator.URL},
		{"admin", "group", "a/b", "--token", "x", "--coordinator", coordinator.URL},
		{"admin", "group", "delete", "a/b", "--token", "x", "--coordinator", coordinator.URL},
		{"admin", "offsets", "a/b", "--token", "x", "--coordinator", coordinator.URL},
		{"admin", "offsets", "reset", "a/b", "demo", "--to", "earliest", "--token", "x", "--coordinator", coordinator.URL},
		{"admin", "config", "a/b", "--offset-reset", "latest", "--token", "x", "--coordinator", coordinator.URL},
		{"admin", "revoke-member", "a/b", "m", "--token", "x", "--coordinator", coordinator.URL},
	} {
		_, stderr, err := cliResult(t, args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, "no space, no '/'") {
			t.Errorf("capgate %s: %v, stderr %q; want exit status 2 and the group-name rule", strings.Join(args, " "), err, stderr)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the coordinator; want none", n)
	}
}

// TestTopicAndMemberArgumentsRefusedBeforeSending: a TOPIC, MEMBER or JTI
// argument that no topic, member or capability has — empty (an unset
// shell variable: `capgate admin revoke g "$TOPIC" 0`), holding '/' or a
// space, a whole token pasted in place of its jti — is refused with exit
// 2 and the rule before anything is sent. It went out
// as another route and came back exit 1 with 404 "no such route … is
// http://… a capgate coordinator?", a hint about the URL that was right
// (newuser4 #4).
func TestTopicAndMemberArgumentsRefusedBeforeSending(t *testing.T) {
	t.Parallel()
	coordinator, requests := countingServer(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "revoke", "g", "", "0"}, `topic "": a topic is 1 to 249 characters`},
		{[]string{"admin", "revoke", "g", "a/b", "0"}, `topic "a/b": a topic is 1 to 249 characters`},
		{[]string{"admin", "lease", "g", "", "0", "--holder", "h", "--ttl", "1m"}, `topic "": a topic is`},
		{[]string{"admin", "offsets", "reset", "g", "", "0", "--to", "earliest"}, `topic "": a topic is`},
		{[]string{"admin", "offsets", "reset", "g", "my topic", "--to", "earliest"}, `topic "my topic": a topic is`},
		{[]string{"admin", "revoke-member", "g", ""}, `member id "": a member id is printable ASCII without space or '/' (capgate admin group g lists the members)`},
		{[]string{"admin", "revoke-member", "g", "a/b"}, `member id "a/b": a member id is`},
		{[]string{"admin", "revoke-capability", ""}, `JTI "": a jti is 22 base64url characters (128 bits): capgate token inspect TOKEN shows a token's jti`},
		{[]string{"admin", "revoke-capability", "eyJhbGciOiJFZERTQSJ9.eyJqdGkiOiJ4In0.c2ln"}, "JTI: that is a whole token, not its id (jti)"},
	} {
		args := append(c.args, "--token", "x", "--coordinator", coordinator.URL)
		_, stderr, err := cliResult(t, args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "no such route") {
			t.Errorf("capgate %q: %v, stderr %q; want exit status 2 and %q", args, err, stderr, c.want)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the coordinator; want none", n)
	}
}

// countingServer is an HTTP server that answers 404 to everything and
// counts the requests that reached it.
func countingServer(t *testing.T) (*httptest.Server, *atomic.Int64) {
	var requests atomic.Int64
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		http.NotFound(w, r)
	}))
	t.Cleanup(s.Close)
	return s, &requests
}

// TestKafkaToolFlagsSayWhatToUse: what a kafka-console-consumer or kcat
// user types first is refused with exit 2 and capgate's way of saying it
// — it was "unknown flag: --from-beginning" and no more; `admin groups
// list` (rpk's words) said cobra's "accepts 0 arg(s), received 1"
// (newuser4 #13). Nothing is sent.
func TestKafkaToolFlagsSayWhatToUse(t *testing.T) {
	t.Parallel()
	coordinator, requests := countingServer(t)
	consume := []string{"consume", "-g", "g", "-t", "demo", "--credential", "x", "--coordinator", coordinator.URL, "--gateways", coordinator.URL}
	produce := []string{"produce", "-t", "demo", "--capability", "x", "--gateways", coordinator.URL}
	for _, c := range []struct {
		args []string
		want string
	}{
		{append(consume, "--from-beginning"), "unknown flag: --from-beginning — capgate consume takes -o start (--offset start)"},
		{append(consume, "--bootstrap-server", "127.0.0.1:9092"), "--gateways URL and --coordinator URL"},
		{append(consume, "-b", "127.0.0.1:9092"), "-b $CAPGATE_KAFKA_BOOTSTRAP"},
		{append(consume, "-p", "0"), "capgate admin grant --topic T --partition P --holder NAME"},
		{append(consume, "-e"), "capgate consume takes --idle-exit 1s"},
		{append(consume, "--max-messages", "5"), "capgate consume takes -n N (--max-records)"},
		{append(produce, "-P"), "capgate produce is kcat's -P mode already: drop it"},
		{append(produce, "--broker-list", "127.0.0.1:9092"), "capgate produce writes through the gateways"},
		{[]string{"admin", "groups", "list", "--token", "x", "--coordinator", coordinator.URL}, `capgate admin groups takes no arguments, got "list"`},
	} {
		_, stderr, err := cliResult(t, c.args...)
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != 2 || !strings.Contains(stderr, c.want) {
			t.Errorf("capgate %q: %v, stderr %q; want exit status 2 and %q", c.args, err, stderr, c.want)
		}
	}
	if n := requests.Load(); n != 0 {
		t.Errorf("%d requests reached the server; want none", n)
	}
}
