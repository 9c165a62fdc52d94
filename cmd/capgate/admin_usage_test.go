package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestArgCountErrorsNameTheArguments: cobra's "accepts 3 arg(s),
// received 2" named no argument (newuser #15); the Use line's do, with
// exit status 2.
func TestArgCountErrorsNameTheArguments(t *testing.T) {
	for args, want := range map[string]string{
		"admin revoke g demo":     "admin revoke: want GROUP TOPIC PARTITION, got 2 arguments (see capgate admin revoke --help)",
		"token inspect":           "token inspect: want TOKEN|-, got none",
		"admin offsets":           "admin offsets: want GROUP, got none",
		"admin group describe":    "admin group describe: want GROUP, got none",
		"admin offsets reset g":   "admin offsets reset: want GROUP TOPIC [PARTITION], got 1 argument",
		"admin revoke-member g":   "admin revoke-member: want GROUP MEMBER, got 1 argument",
		"admin group delete a b":  "admin group delete: want GROUP, got 2 arguments",
		"admin revoke-capability": "admin revoke-capability: want JTI, got none",
	} {
		a := strings.Fields(args)
		if a[0] == "admin" { // nothing is sent: refused first
			a = append(a, "--coordinator", "http://127.0.0.1:1")
		}
		wantUsageError(t, a, want)
	}
}

// wantUsageError runs capgate args and wants exit status 2 with an error
// saying want.
func wantUsageError(t *testing.T, args []string, want string) {
	t.Helper()
	_, err := run(t, args...)
	if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), want) {
		t.Errorf("capgate %s: %v, want exit 2 and %q", strings.Join(args, " "), err, want)
	}
}

// joinAs joins group at base with credential, as a consumer of topic.
func joinAs(t *testing.T, base, credential, group, topic string) {
	t.Helper()
	if status := joinStatus(t, base, credential, group, topic); status != http.StatusOK {
		t.Fatalf("join %s: %d", group, status)
	}
}

// TestAdminGroupHints (newuser #13, #15, polish): `admin group list`
// (rpk's words) looked up a group named list; `admin group delete` of a
// group with members relayed the server's "delete with force"; the
// creator was a bare jti; the describe had no group state. Now: a hint
// to `admin groups`, to --force, the creating credential's name beside
// its id, and STATE as rpk's (Empty, Stable).
func TestAdminGroupHints(t *testing.T) {
	base, admin := startCoordinator(t)
	flags := []string{"--coordinator", base, "--token", admin}
	out, err := run(t, append([]string{"admin", "client-credential", "--name", "orders-svc", "--groups", "billing", "-o", "json"}, flags...)...)
	var cred struct {
		Credential string `json:"client_credential"`
		JTI        string `json:"jti"`
	}
	if err != nil || json.Unmarshal([]byte(out), &cred) != nil || cred.JTI == "" {
		t.Fatalf("client-credential: %v %s", err, out)
	}
	stateIs := func(group, want string) {
		t.Helper()
		out, err := run(t, append([]string{"admin", "group", group, "-o", "table"}, flags...)...)
		if err != nil || !regexp.MustCompile(`(?m)^STATE\s+`+want+`$`).MatchString(out) {
			t.Errorf("admin group %s -o table: %v\n%s\nwant STATE %s", group, err, out, want)
		}
	}
	if _, err := run(t, append([]string{"admin", "config", "idle", "--offset-reset", "latest"}, flags...)...); err != nil {
		t.Fatal(err)
	}
	stateIs("idle", "Empty") // rpk's word for a group without members
	joinAs(t, base, cred.Credential, "billing", "orders")
	stateIs("billing", "Stable")

	_, err = run(t, append([]string{"admin", "group", "list"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "unknown group list") || !strings.Contains(err.Error(), "did you mean `capgate admin groups`?") {
		t.Errorf("admin group list: %v", err)
	}
	_, err = run(t, append([]string{"admin", "group", "delete", "billing"}, flags...)...)
	if err == nil || !strings.Contains(err.Error(), "409") || !strings.Contains(err.Error(), "pass --force to revoke them first: capgate admin group delete billing --force") {
		t.Errorf("admin group delete of a group with a member: %v", err)
	}
	out, err = run(t, append([]string{"admin", "group", "billing", "-o", "table"}, flags...)...)
	if err != nil || !regexp.MustCompile(`(?m)^CREATOR\s+orders-svc \(`+regexp.QuoteMeta(cred.JTI)+`\)$`).MatchString(out) {
		t.Errorf("admin group billing -o table: %v\n%s\nwant CREATOR orders-svc (%s)", err, out, cred.JTI)
	}
	// JSON keeps the API's answer: the id alone.
	out, err = run(t, append([]string{"admin", "group", "billing", "-o", "json"}, flags...)...)
	var d struct{ Creator string }
	if err != nil || json.Unmarshal([]byte(out), &d) != nil || d.Creator != cred.JTI {
		t.Errorf("admin group billing -o json: creator %q, want %q (%v)", d.Creator, cred.JTI, err)
	}
	if _, err := run(t, append([]string{"admin", "group", "delete", "billing", "--force"}, flags...)...); err != nil {
		t.Errorf("delete --force: %v", err)
	}
}

// TestArgumentBeginningWithDash: a jti can begin with '-' (one in 64
// before NewJTI stopped making them), and pflag read
// `admin revoke-capability -ckp…` as shorthand flags: "unknown shorthand
// flag: 'c' in -ckp…", with no way out named. The error now says to put
// it after "--", and that command works.
func TestArgumentBeginningWithDash(t *testing.T) {
	base, admin := startCoordinator(t)
	const jti = "-ckpMYd7psOAlDaquRrLSw"
	flags := []string{"--coordinator", base, "--token", admin, "-o", "json"}
	_, err := run(t, append([]string{"admin", "revoke-capability", jti}, flags...)...)
	want := "if " + jti + " is an argument, put it after --: capgate admin revoke-capability -- " + jti
	if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), want) {
		t.Fatalf("revoke-capability %s: %v, want exit 2 and %q", jti, err, want)
	}
	out, err := run(t, append(append([]string{"admin", "revoke-capability"}, flags...), "--", jti)...)
	if err != nil || !strings.Contains(out, `"jti": "`+jti+`"`) {
		t.Fatalf("revoke-capability -- %s: %v %s", jti, err, out)
	}
	// An unknown flag of a command taking no argument says nothing of
	// arguments (consume's GROUP in "-g GROUP" is a flag's value).
	for _, args := range [][]string{{"admin", "groups", "--coordinator", base, "-z"}, {"consume", "-z"}} {
		if _, err := run(t, args...); err == nil || strings.Contains(err.Error(), "is an argument") {
			t.Errorf("%s: %v", strings.Join(args, " "), err)
		}
	}
}

// TestMistypedFlagsSayWhichIsMeant: a flag a letter off, or the start or
// an extension of one, was "unknown flag: --gateway" and no more
// (newuser5: consume takes --gateways, admin --token-file); it names the
// flag meant, exit 2 still. One like no flag stays as it was, and
// capgate topic describe (rpk's words) points at admin topic.
func TestMistypedFlagsSayWhichIsMeant(t *testing.T) {
	for args, want := range map[string]string{
		"consume -g x -t demo --gateway http://127.0.0.1:1": "unknown flag: --gateway; did you mean --gateways?",
		"consume -g x -t demo --topics demo":                "unknown flag: --topics; did you mean --topic?",
		"consume -g x -t demo --group-id g":                 "unknown flag: --group-id; did you mean --group?",
		"admin groups --token-files f":                      "unknown flag: --token-files; did you mean --token-file?",
		"admin groups --coordinatr http://127.0.0.1:1":      "unknown flag: --coordinatr; did you mean --coordinator?",
		"produce -t demo --partiton 1":                      "unknown flag: --partiton; did you mean --partition?",
		"dev --data-dr x":                                   "unknown flag: --data-dr; did you mean --data-dir?",
		"topic describe demo":                               `unknown command "topic" for "capgate"; did you mean capgate admin topic?`,
		"groups":                                            `unknown command "groups" for "capgate"; did you mean capgate admin groups?`,
	} {
		wantUsageError(t, strings.Fields(args), want)
	}
	_, err := run(t, "consume", "-g", "x", "-t", "demo", "--zzz")
	if err == nil || exitCode(err) != exitUsage || strings.Contains(err.Error(), "did you mean") {
		t.Errorf("capgate consume --zzz: %v, want exit 2 and no suggestion", err)
	}
}

// TestFlagErrorsSayWhereTheFlagsAre: a flag like no flag of the command
// was "unknown flag: --zzz" and no more, and a number flag given a word
// Go's `strconv.ParseInt: parsing "x": invalid syntax` (newuser14's
// walk); each now says what it wants and where the flags are, exit 2.
func TestFlagErrorsSayWhereTheFlagsAre(t *testing.T) {
	for args, want := range map[string]string{
		"consume -g x -t demo --zzz":                   "unknown flag: --zzz (see capgate consume --help)",
		"admin groups -z":                              "unknown shorthand flag: 'z' in -z (see capgate admin groups --help)",
		"admin offsets readme reset --topic demo":      "unknown flag: --topic (see capgate admin offsets --help)",
		"produce -t demo -p x":                         `--partition "x": want a whole number (see capgate produce --help)`,
		"consume -g g -t demo -n 99999999999999999999": `--max-records "99999999999999999999": want a whole number that fits in int (see capgate consume --help)`,
	} {
		wantUsageError(t, strings.Fields(args), want)
	}
}

// TestDurationFlagsSayTheUnit: "--idle-exit 10" was refused with Go's
// `time: missing unit in duration "10"` and no word of what to write
// (newuser7); every duration flag now says it as the config files do,
// exit 2.
func TestDurationFlagsSayTheUnit(t *testing.T) {
	for args, want := range map[string]string{
		"consume -g g -t demo --idle-exit 10":        "--idle-exit 10: 10 is not a duration: write it with a unit, e.g. 10s (see capgate consume --help)",
		"consume -g g -t demo --commit-interval=0.5": "--commit-interval 0.5: 0.5 is not a duration: write it with a unit, e.g. 0.5s",
		"consume -g g -t demo --idle-exit 1d":        `--idle-exit "1d": want a duration such as 30s, 500ms or 5m (units ns, us, ms, s, m, h)`,
		"admin lease g demo 0 --ttl 30":              "--ttl 30: 30 is not a duration: write it with a unit, e.g. 30s (see capgate admin lease --help)",
	} {
		wantUsageError(t, strings.Fields(args), want)
	}
}

// TestMistypedCommandBeforeItsFlags: a command typed wrong and followed
// by its flags — `capgate consum --group g`, `capgate admin oauth create
// --name x` — was refused for the flag ("unknown flag: --group",
// "unknown shorthand flag: 'g' in -g"): cobra stops at the last command
// it knows and parses the rest as that one's flags (newuser7). The
// mistyped word is named, with the command meant, exit 2; a real unknown
// flag of a grouping command stays one.
func TestMistypedCommandBeforeItsFlags(t *testing.T) {
	for args, want := range map[string]string{
		"consum --group g -t demo":                     `unknown command "consum" for "capgate"; did you mean consume?`,
		"consum -g g":                                  `unknown command "consum" for "capgate"; did you mean consume?`,
		"admin oauth create --name x --groups g":       `unknown command "oauth" for "capgate admin"; did you mean oauth-client?`,
		"keys generat --out k.json":                    `unknown command "generat" for "capgate keys"; did you mean generate?`,
		"admin --bogus":                                "unknown flag: --bogus",
		"admin group g --bogus":                        "unknown flag: --bogus",
		"admin oauth-client creat --name x --groups g": `unknown command "creat" for "capgate admin oauth-client"; did you mean create?`,
	} {
		wantUsageError(t, strings.Fields(args), want)
	}
}

// TestGatewaysWithoutSchemeSayWhatToWrite: --gateways 127.0.0.1:8080 —
// how kcat and Kafka clients take addresses — was "must be an http(s)
// URL with a host" (the SDK's Config check, the Go SDK's own error too);
// --coordinator said what to write, --gateways did not (newuser7). Both
// say it now, exit 2; the scheme is never guessed.
func TestGatewaysWithoutSchemeSayWhatToWrite(t *testing.T) {
	for _, addr := range []string{"127.0.0.1:8080", "localhost:8080"} {
		wantUsageError(t, []string{"consume", "-g", "g", "-t", "demo", "--credential", "x", "--coordinator", "http://127.0.0.1:1", "--gateways", addr},
			"--gateways: must be an http(s) URL with a host, got \""+addr+"\": write http://"+addr+" (https://"+addr+" for a TLS server)")
	}
}

// TestOpsCheckedBeforeSending: an --ops name no capability or credential
// has went to the coordinator and came back a 400, exit 1 (newuser7); it
// is refused before anything is sent, exit 2, with the names there are.
func TestOpsCheckedBeforeSending(t *testing.T) {
	for args, want := range map[string]string{
		"admin grant --topic demo --partition 3 --holder me --ops fetch,write":           `--ops fetch,write: unknown op: "write" (a capability's ops: fetch, commit, produce)`,
		"admin client-credential --name x --groups g --ops read":                         `--ops read: unknown op: "read" (a client credential's ops: consume, produce)`,
		"admin oauth-client create --name x --groups g --topics demo --ops consume,writ": `--ops consume,writ: unknown op: "writ" (a client credential's ops: consume, produce)`,
	} {
		// Nothing listens at port 1: a request sent would fail otherwise.
		wantUsageError(t, append(strings.Fields(args), "--coordinator", "http://127.0.0.1:1", "--token", "x"), want)
	}
}

// TestKafkaConsumerGroupsFlagsSayWhatToUse: kafka-consumer-groups' flags
// on the admin commands that do its work were bare "unknown flag"
// (newuser5: offsets reset --to-earliest), and so were kcat's -X, -F, -G
// and -J on consume and produce; each says what to use, exit 2.
func TestKafkaConsumerGroupsFlagsSayWhatToUse(t *testing.T) {
	for args, want := range map[string]string{
		"admin offsets reset g demo --to-earliest":         "unknown flag: --to-earliest — capgate admin offsets reset takes --to earliest",
		"admin offsets reset g demo --to-offset 3":         "takes --to OFFSET",
		"admin offsets reset g demo --to latest --execute": "there is no dry run: drop --execute",
		"admin offsets reset g --topic demo --to latest":   "TOPIC is an argument: capgate admin offsets reset GROUP TOPIC",
		"admin group g --describe":                         "capgate admin group GROUP describes it",
		"admin groups --list":                              "capgate admin groups lists them",
		"consume -g g -t demo -X security.protocol=SSL":    "capgate takes no librdkafka properties",
		"produce -t demo -F kcat.conf":                     "capgate takes no librdkafka properties",
		"consume -G g demo":                                "capgate consume is a group consumer already (kcat's -G): -g GROUP -t TOPIC",
		"consume -g g -t demo -J":                          "capgate consume takes -f json",
	} {
		wantUsageError(t, strings.Fields(args), want)
	}
}

// TestProduceBadArgumentsAreUsageErrors: produce -p -1 went out and came
// back 400 (exit 1), a topic no Kafka topic can be a 404 from the mint,
// --batch-records 0 exit 1 (newuser5); each is a usage error now, before
// anything is read or sent.
func TestProduceBadArgumentsAreUsageErrors(t *testing.T) {
	for args, want := range map[string]string{
		"produce -t demo -p -1":             "--partition -1: want a partition ≥ 0",
		"produce -t a/b":                    `--topic: topic "a/b": a topic is`,
		"produce -t demo --batch-records 0": "--batch-records and --batch-bytes: must be >= 1",
	} {
		wantUsageError(t, append(strings.Fields(args), "--coordinator", "http://127.0.0.1:1", "--token", "x"), want)
	}
}

// TestNoCredentialPointsAtDevFiles: a command run without its
// credential (a new shell, credentials.env not sourced) did not say that
// capgate dev's credentials were right there (newuser7). It names
// ./capgate-data's files when they are in the working directory, and
// only then; the exit status stays 1 (README: no credential found is a
// failure, not a usage error).
func TestNoCredentialPointsAtDevFiles(t *testing.T) {
	for _, env := range []string{"CAPGATE_CREDENTIAL", "CAPGATE_ADMIN_TOKEN", "CAPGATE_CAPABILITY"} {
		t.Setenv(env, "")
	}
	t.Chdir(t.TempDir())
	cases := map[string]string{
		"consume -g g -t demo": "no client credential: pass --credential-file",
		"admin groups":         "no admin_token: pass --token, --token-file or set CAPGATE_ADMIN_TOKEN",
		"produce -t demo -p 0": "nothing to produce with: pass a client credential",
	}
	for args, want := range cases {
		_, err := run(t, strings.Fields(args)...)
		if err == nil || exitCode(err) != exitFailure || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "capgate dev's are here") {
			t.Errorf("capgate %s: %v, want exit 1 and %q, no word of capgate-data where there is none", args, err, want)
		}
	}
	writeDevFile(t, filepath.Join("capgate-data", "credentials.json"))
	for args, want := range map[string]string{
		"consume -g g -t demo": "; capgate dev's are here: --credential-file capgate-data/credentials.json, or run . ./capgate-data/credentials.env first",
		"admin groups":         "; capgate dev's are here: --token-file capgate-data/credentials.json, or run . ./capgate-data/credentials.env first",
		"produce -t demo -p 0": "; capgate dev's are here: --token-file capgate-data/credentials.json",
	} {
		if _, err := run(t, strings.Fields(args)...); err == nil || exitCode(err) != exitFailure || !strings.Contains(err.Error(), want) {
			t.Errorf("capgate %s: %v, want exit 1 and %q", args, err, want)
		}
	}
}

// writeDevFile writes an empty file at path, making its directory.
func writeDevFile(t *testing.T, path string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
}
