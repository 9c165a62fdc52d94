package main

import (
	"bufio"
	"bytes"
	"context"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/zap"
)

// runIn runs the CLI as run does, with stdin.
func runIn(t *testing.T, stdin string, args ...string) (string, error) {
	t.Helper()
	root := newRoot()
	var out bytes.Buffer
	root.SetIn(strings.NewReader(stdin))
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	return out.String(), err
}

// sourceCredentialsEnv sets the variables of dir/credentials.env for the
// test, as `. ./capgate-data/credentials.env` does in a shell.
func sourceCredentialsEnv(t *testing.T, dir string) map[string]string {
	t.Helper()
	f, err := os.Open(filepath.Join(dir, credentialsEnvFile))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	vars := map[string]string{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(strings.TrimPrefix(sc.Text(), "export "), "=")
		if !ok {
			t.Fatalf("credentials.env line %q", sc.Text())
		}
		vars[name] = value
		t.Setenv(name, value)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return vars
}

// TestDevReplicasCredentialsEnv: `capgate dev --replicas 3` writes the
// replicas' URLs comma-separated into credentials.env; in a shell that
// sourced it, the walk-through's first command (produce, which mints its
// capability through the admin API) works, and so do `capgate
// coordinator` and `capgate gateway` (their config loader skips every
// variable the file sets). produce used the list as one URL ("invalid
// port"), and CAPGATE_KAFKA_BOOTSTRAP "named no setting".
func TestDevReplicasCredentialsEnv(t *testing.T) {
	dir := t.TempDir()
	f := devFlags{dataDir: dir, brokerAddr: "127.0.0.1:0", coordinatorAddr: "127.0.0.1:0", gatewayAddr: "127.0.0.1:0", kafkaAddr: "127.0.0.1:0", replicas: 3}
	dev, err := startDev(context.Background(), f, zap.NewNop())
	if err != nil {
		t.Fatal(err)
	}
	defer dev.Close()
	vars := sourceCredentialsEnv(t, dir)
	if got := strings.Count(vars[envCoordinatorURL], ","); got != 2 || vars[envKafkaBootstrap] == "" {
		t.Fatalf("credentials.env: %s=%q %s=%q, want 3 URLs and the Kafka listener", envCoordinatorURL, vars[envCoordinatorURL], envKafkaBootstrap, vars[envKafkaBootstrap])
	}
	t.Run("produce", func(t *testing.T) {
		out, err := runIn(t, "hello\nworld\n", "produce", "--topic", devTopic, "--partition", "2")
		if err != nil || !strings.Contains(out, "produced 2 records to demo/2 (offsets 0..1)") {
			t.Fatalf("produce: %v\n%s", err, out)
		}
		// Without --partition: the partition count comes from the mint;
		// the keyless lines, read together, are one write (sticky).
		out, err = runIn(t, "a\nb\nc\n", "produce", "--topic", devTopic)
		if err != nil || !regexp.MustCompile(`produced 3 records to demo/\d+ \(offsets \d+\.\.\d+\)`).MatchString(out) {
			t.Fatalf("produce without --partition: %v\n%s", err, out)
		}
	})
	t.Run("one URL for curl", func(t *testing.T) {
		// curl takes one URL and follows no 421: the README's
		// "${CAPGATE_COORDINATOR_URL%%,*}" (the first replica) answered
		// 421 not_leader to every curl step whenever it did not lead.
		// CAPGATE_LEADER_URL is the replica that leads; the others 421.
		leader := vars[envLeaderURL]
		if !slices.Contains(strings.Split(vars[envCoordinatorURL], ","), leader) {
			t.Fatalf("%s=%q is not one of %s=%q", envLeaderURL, leader, envCoordinatorURL, vars[envCoordinatorURL])
		}
		for _, u := range strings.Split(vars[envCoordinatorURL], ",") {
			want := http.StatusMisdirectedRequest
			if u == leader {
				want = http.StatusOK
			}
			if got := joinStatus(t, u, vars[envCredential], "g", "demo"); got != want {
				t.Errorf("join at %s (leader %s): %d, want %d", u, leader, got, want)
			}
		}
	})
	t.Run("coordinator and gateway load their config", func(t *testing.T) {
		for _, section := range []string{"coordinator", "gateway"} {
			if _, err := loadConfig("", section); err != nil {
				t.Errorf("%s after sourcing credentials.env: %v", section, err)
			}
		}
	})
}

// TestSaveCredentialsRefusesAVariableTheConfigLoaderReads: a name
// credentials.env would export that the config loader does not skip is
// refused when written, so the file and the loader cannot drift apart.
func TestSaveCredentialsRefusesAVariableTheConfigLoaderReads(t *testing.T) {
	dir := t.TempDir()
	creds, err := loadOrMakeCredentials(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = saveCredentials(dir, creds, [][2]string{{envCoordinatorURL, "http://c"}, {"CAPGATE_GATEWAY_LISTEN", ":1"}})
	if err == nil || !strings.Contains(err.Error(), "CAPGATE_GATEWAY_LISTEN is not skipped by the config loader") {
		t.Fatalf("saveCredentials: %v", err)
	}
	for _, name := range credentialsEnvVariables {
		if !cliVariables[name] {
			t.Errorf("%s is written into credentials.env but read by the config loader", name)
		}
	}
}

// joinStatus is the status of a join of group (to topic) at the coordinator base
// with credential, sent as the README's curl step sends it.
func joinStatus(t *testing.T, base, credential, group, topic string) int {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, base+"/v1/groups/"+group+"/join", strings.NewReader(`{"topics":[`+strconv.Quote(topic)+`]}`))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+credential)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}
