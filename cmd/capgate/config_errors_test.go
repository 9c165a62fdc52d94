package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestConfigFileErrorsNameTheSetting: mistakes in capgate.yaml (the file
// every `capgate coordinator` and `capgate gateway` loads) are named by
// their setting's path and line with what it wants — never yaml.v3's Go
// type names (gateway.Config, main.fileConfig, time.Duration).
func TestConfigFileErrorsNameTheSetting(t *testing.T) {
	cases := []struct{ section, file, want string }{
		{"gateway", "gateway:\n  id: g\n  sync_timout: 5s\n",
			"gateway.sync_timout (line 3): unknown setting; did you mean sync_timeout?"},
		{"gateway", "gatway:\n  id: g\n", "gatway (line 1): unknown setting; did you mean gateway?"},
		{"gateway", "gateway:\n  max_wait: 30\n",
			"gateway.max_wait (line 2): 30 is not a duration: write it with a unit, e.g. 30s"},
		{"gateway", "gateway:\n  sync_timeout: five\n",
			`gateway.sync_timeout (line 2): want a duration such as 30s or 5m, got "five"`},
		{"gateway", "gateway:\n  broker:\n    seeds: 127.0.0.1:9092\n",
			`gateway.broker.seeds (line 3): want a list such as [a, b], got "127.0.0.1:9092"`},
		{"gateway", "gateway:\n  tls:\n    cert_fle: g.crt\n",
			"gateway.tls.cert_fle (line 3): unknown setting; did you mean cert_file?"},
		{"coordinator", "coordinator:\n  max_connections: many\n",
			`coordinator.max_connections (line 2): want a whole number (64-bit), got "many"`},
		{"coordinator", "coordinator:\n  replica: [c1]\n",
			"coordinator.replica (line 2): want a map of settings (name: value), got a list"},
		{"coordinator", "log:\n  levle: debug\n", "log.levle (line 2): unknown setting; did you mean level?"},
		// Another section's setting was "did you mean kafka_state?".
		{"coordinator", "coordinator:\n  kafka_listen: 127.0.0.1:9093\n",
			"coordinator.kafka_listen (line 2): unknown setting; kafka_listen is a gateway setting: put it under gateway:"},
		{"gateway", "gateway:\n  level: debug\n", "gateway.level (line 2): unknown setting; level is a log setting: put it under log:"},
		// YAML syntax errors said only yaml.v3's words.
		{"coordinator", "coordinator:\n listen: 127.0.0.1:7070\n   data_dir: d\n", "yaml: line 3: mapping values are not allowed in this context" + yamlHint},
		{"coordinator", "coordinator:\n\tlisten: 127.0.0.1:7070\n", "yaml: line 2: found character that cannot start any token" + yamlHint},
	}
	// Validation after decoding: the issuer of a dev IdP on plain
	// http said "must be an https URL" and not why nor what to do
	// (newuser7).
	oidc := "coordinator:\n  oidc:\n    issuers:\n      - issuer: http://localhost:8080/realms/dev\n        audiences: [capgate]\n" +
		"        rules:\n          - {claim: groups, value: g, groups: [g]}\n"
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	if err := os.WriteFile(path, []byte(oidc), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(path, "coordinator"); err == nil || !strings.Contains(err.Error(),
		`oidc.issuers[0].issuer: must be an https URL, got "http://localhost:8080/realms/dev": the issuer's signing keys are fetched from it`) ||
		!strings.Contains(err.Error(), "serve the IdP over TLS (a private CA goes in ca_file)") {
		t.Errorf("an http issuer: %v", err)
	}
	// The other process's file ran on this one's defaults, silently.
	for _, c := range []struct{ section, file, want string }{
		{"coordinator", "gateway:\n  id: g1\n", "has a gateway: section and no coordinator: section — capgate coordinator reads the settings under coordinator: (was this the gateway's file?"},
		{"gateway", "log:\n  level: info\ncoordinator:\n  listen: 127.0.0.1:7070\n", "has a coordinator: section and no gateway: section — capgate gateway reads the settings under gateway:"},
	} {
		if _, err := loadConfig(writeConfig(t, c.file), c.section); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q as %s's: %v, want %q", c.file, c.section, err, c.want)
		}
	}
	// A gateway configured by its variables beside a shared file of
	// the coordinator's was refused.
	t.Setenv("CAPGATE_GATEWAY_ID", "g-env")
	if cfg, err := loadConfig(writeConfig(t, "coordinator:\n  listen: 127.0.0.1:7070\n"), "gateway"); err != nil || cfg.Gateway.ID != "g-env" {
		t.Errorf("a gateway set by CAPGATE_GATEWAY_* beside the coordinator's file: %v (id %q)", err, cfg.Gateway.ID)
	}
	if _, err := loadConfig(writeConfig(t, "gateway:\n  id: g1\n"), "coordinator"); err == nil {
		t.Error("the gateway's variables made the gateway's file the coordinator's")
	}
	for _, file := range []string{"log:\n  level: debug\n", "", "coordinator:\n  listen: 127.0.0.1:7070\ngateway:\n  id: g1\n"} {
		if _, err := loadConfig(writeConfig(t, file), "coordinator"); err != nil {
			t.Errorf("%q as the coordinator's: %v", file, err)
		}
	}
	// A listen address that is a port alone or a URL said "must be
	// host:port" and not what to write.
	for _, c := range []struct{ section, file, want string }{
		{"gateway", "gateway:\n  listen: 8080\n", `gateway.listen: must be host:port, got "8080": write 127.0.0.1:8080 (this machine only) or :8080 (every interface)`},
		{"gateway", "gateway:\n  kafka_listen: 9093\n", `gateway.kafka_listen: must be host:port, got "9093": write 127.0.0.1:9093`},
		{"coordinator", "coordinator:\n  listen: http://127.0.0.1:7070\n", `listen: must be host:port, got "http://127.0.0.1:7070": an address, not a URL: write 127.0.0.1:7070`},
	} {
		if _, err := loadConfig(writeConfig(t, c.file), c.section); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: %v, want %q", c.file, err, c.want)
		}
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "capgate.yaml")
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(path, c.section)
		if err == nil || err.Error() != "config: "+path+": "+c.want {
			t.Errorf("%q:\n got  %v\n want config: %s: %s", c.file, err, path, c.want)
		}
	}
}

// TestConfigEnvErrorsSayWhatToWrite: the CAPGATE_* variables said less
// than the file of the same mistakes (newuser7): a duration without a
// unit was Go's `time: missing unit in duration "10"`, a variable a
// letter off a setting "names no setting" with no word of which. Both
// are worded as the file's now.
func TestConfigEnvErrorsSayWhatToWrite(t *testing.T) {
	cases := []struct{ name, value, want string }{
		{"CAPGATE_COORDINATOR_GROUPS_SESSION_TIMEOUT", "10",
			"config: CAPGATE_COORDINATOR_GROUPS_SESSION_TIMEOUT (coordinator.groups.session_timeout): 10 is not a duration: write it with a unit, e.g. 10s"},
		{"CAPGATE_GATEWAY_SYNC_TIMEOUT", "five",
			`config: CAPGATE_GATEWAY_SYNC_TIMEOUT (gateway.sync_timeout): want a duration such as 30s or 5m, got "five"`},
		{"CAPGATE_COORDINATOR_DATADIR", "x",
			"config: CAPGATE_COORDINATOR_DATADIR names no setting; did you mean CAPGATE_COORDINATOR_DATA_DIR?"},
		{"CAPGATE_GATEWAY_SYNC_TIMOUT", "5s",
			"config: CAPGATE_GATEWAY_SYNC_TIMOUT names no setting; did you mean CAPGATE_GATEWAY_SYNC_TIMEOUT?"},
		{"CAPGATE_FROBNICATE", "1", "config: CAPGATE_FROBNICATE names no setting"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Setenv(c.name, c.value)
			_, err := loadConfig("", "gateway")
			if err == nil || err.Error() != c.want {
				t.Errorf("%s=%s:\n got  %v\n want %s", c.name, c.value, err, c.want)
			}
		})
	}
}

// TestReplicaSectionMustMatchStateAndListener: a replica section under
// state: badger is refused (it would be ignored), and so is an advertise
// URL whose scheme is not what the listener serves (every 421 not_leader
// sends clients there); matching ones load.
func TestReplicaSectionMustMatchStateAndListener(t *testing.T) {
	const kafka = "coordinator:\n  state: kafka\n  kafka_state:\n    kek_env: CAPGATE_TEST_KEK\n"
	const tls = "  tls:\n    cert_file: c.crt\n    key_file: c.key\n"
	cases := []struct{ file, want string }{
		{"coordinator:\n  replica:\n    id: c1\n",
			"config: coordinator: replica: replicas need state: kafka (they share its state log; state is badger): set state: kafka and kafka_state, or remove the replica section"},
		{"coordinator:\n  state: badger\n  replica:\n    advertise: http://c1:7070\n", "replica: replicas need state: kafka"},
		{kafka + "  replica:\n    advertise: https://c1.internal:7070\n",
			`config: coordinator: replica.advertise: "https://c1.internal:7070" is https but the listener serves plain HTTP (no tls.cert_file): configure tls, or advertise http://`},
		{kafka + tls + "  replica:\n    advertise: http://c1.internal:7070\n",
			`config: coordinator: replica.advertise: "http://c1.internal:7070" is http but the listener serves HTTPS (tls.cert_file is set): advertise https://`},
		{kafka + tls + "  replica:\n    advertise: https://c1.internal:7070\n", ""},
		{kafka + "  replica:\n    id: c1\n    advertise: http://c1.internal:7070\n", ""},
		{kafka + tls + "  replica:\n    id: c1\n", ""},
		{"coordinator:\n  state: badger\n", ""},
		{kafka + "  replica:\n    peers: [http://c1:7070/console]\n",
			`config: coordinator: replica.peers: each must be a replica's base URL (http(s)://host:port), got "http://c1:7070/console"`},
		{kafka + "  replica:\n    peers: [http://c1:7070, http://c1:7070/]\n", `replica.peers: "http://c1:7070/" is listed twice`},
		{kafka + "  replica:\n    peers: [c1:7070]\n", `replica.peers: each must be a replica's base URL`},
		{kafka + "  replica:\n    id: c1\n    advertise: http://c1:7070\n    peers: [http://c1:7070, http://c2:7070, http://c3:7070]\n", ""},
	}
	for _, c := range cases {
		path := filepath.Join(t.TempDir(), "capgate.yaml")
		if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := loadConfig(path, "coordinator")
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%q: %v, want it loaded", c.file, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%q:\n got  %v\n want %s", c.file, err, c.want)
		}
	}
}

// TestReadmeReplicaExampleLoads: README §Three coordinator replicas' YAML
// loads as a coordinator's config, and does with the per-replica
// environment overlay the README shows.
func TestReadmeReplicaExampleLoads(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(readme), "### Three coordinator replicas")
	_, block, ok2 := strings.Cut(section, "```yaml\n")
	block, _, ok3 := strings.Cut(block, "```")
	if !ok || !ok2 || !ok3 {
		t.Fatal("README: no YAML block under ### Three coordinator replicas")
	}
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	if err := os.WriteFile(path, []byte(block), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadConfig(path, "coordinator"); err != nil {
		t.Fatalf("README replica example: %v\n%s", err, block)
	}
	t.Setenv("CAPGATE_COORDINATOR_REPLICA_ID", "c2")
	t.Setenv("CAPGATE_COORDINATOR_REPLICA_ADVERTISE", "https://c2.internal:7070")
	if _, err := loadConfig(path, "coordinator"); err != nil {
		t.Fatalf("README replica example with the c2 overlay: %v", err)
	}
}

// yamlHint is what a YAML syntax error adds to yaml.v3's words.
const yamlHint = " (YAML syntax: check the indentation on and above that line — spaces, not tabs, " +
	"each setting indented under its section — and that each setting is name: value)"

// writeConfig writes body as a config file of its own; its path.
func writeConfig(t *testing.T, body string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "capgate.yaml")
	if err := os.WriteFile(path, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
