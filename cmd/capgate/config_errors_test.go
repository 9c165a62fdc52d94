package main

import (
	"os"
	"path/filepath"
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
