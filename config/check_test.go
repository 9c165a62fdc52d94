package config

import (
	"strings"
	"testing"
	"time"
)

type checkedInner struct {
	SyncTimeout time.Duration     `yaml:"sync_timeout"`
	Seeds       []string          `yaml:"seeds"`
	MaxBytes    int32             `yaml:"max_bytes"`
	Enabled     bool              `yaml:"enabled"`
	Labels      map[string]string `yaml:"labels"`
	embedded    `yaml:",inline"`
}

type embedded struct {
	CertFile string `yaml:"cert_file"`
}

type checked struct {
	Gateway checkedInner   `yaml:"gateway"`
	Peers   []checkedInner `yaml:"peers"`
}

// TestDecodeErrorsNameThePathAndWhatItWants: every unknown key and every
// value of the wrong type is named by its setting's dotted path and line,
// with what the setting takes, in the file's words (no Go type names).
func TestDecodeErrorsNameThePathAndWhatItWants(t *testing.T) {
	cases := []struct{ name, yaml, want string }{
		{"typo suggests the key", "gateway:\n  max_bytes: 1\n  sync_timout: 5s\n",
			"gateway.sync_timout (line 3): unknown setting; did you mean sync_timeout?"},
		{"top-level typo", "gatway:\n  max_bytes: 1\n",
			"gatway (line 1): unknown setting; did you mean gateway?"},
		{"far from any key", "gateway:\n  frobnicate: 1\n",
			"gateway.frobnicate (line 2): unknown setting"},
		{"inline field's typo", "gateway:\n  cert_fil: x\n",
			"gateway.cert_fil (line 2): unknown setting; did you mean cert_file?"},
		{"duration without unit", "gateway:\n  sync_timeout: 30\n",
			"gateway.sync_timeout (line 2): 30 is not a duration: write it with a unit, e.g. 30s"},
		{"duration word", "gateway:\n  sync_timeout: five\n",
			`gateway.sync_timeout (line 2): want a duration such as 30s or 5m, got "five"`},
		{"string for a number", "gateway:\n  max_bytes: lots\n",
			`gateway.max_bytes (line 2): want a whole number (32-bit), got "lots"`},
		{"number too big", "gateway:\n  max_bytes: 99999999999\n",
			`gateway.max_bytes (line 2): want a whole number (32-bit), got "99999999999"`},
		{"not a bool", "gateway:\n  enabled: sometimes\n",
			`gateway.enabled (line 2): want true or false, got "sometimes"`},
		{"scalar for a list", "gateway:\n  seeds: 127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094,127.0.0.1:9095,127.0.0.1:9096\n",
			`gateway.seeds (line 2): want a list such as [a, b], got "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094,127.0.0.1:9095,…"`},
		{"list for a section", "gateway:\n  - sync_timeout: 1s\n",
			"gateway (line 2): want a map of settings (name: value), got a list"},
		{"list for a map", "gateway:\n  labels: [a, b]\n",
			"gateway.labels (line 2): want a map of name: value, got a list"},
		{"map for a value", "gateway:\n  max_bytes:\n    a: 1\n",
			"gateway.max_bytes (line 3): want a whole number (32-bit), got a map"},
		{"inside a list", "peers:\n  - max_bytes: 1\n  - sync_timeout: 2\n",
			"peers[1].sync_timeout (line 3): 2 is not a duration: write it with a unit, e.g. 2s"},
		{"every problem", "gateway:\n  sync_timout: 5s\n  max_bytes: x\n",
			"gateway.sync_timout (line 2): unknown setting; did you mean sync_timeout?\n" +
				`gateway.max_bytes (line 3): want a whole number (32-bit), got "x"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var c checked
			err := Load(write(t, tc.yaml), nil, &c)
			if err == nil || !strings.HasSuffix(err.Error(), ": "+tc.want) {
				t.Fatalf("err = %v\nwant it to end %q", err, tc.want)
			}
			for _, leak := range []string{"!!", "config.", "time.Duration", "[]string", "int32", "unmarshal"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("err = %v: leaks %q", err, leak)
				}
			}
		})
	}
}

// TestDecodeAcceptsWhatYAMLAccepts: the check refuses nothing the decoder
// takes (nulls, aliases, numbers into text, empty documents).
func TestDecodeAcceptsWhatYAMLAccepts(t *testing.T) {
	for _, body := range []string{
		"", "# nothing\n", "gateway:\n", "gateway: ~\n", "gateway:\n  seeds: ~\n  sync_timeout: 1m30s\n",
		"gateway:\n  cert_file: 123\n  labels: {a: 1}\n  seeds: [a, 1]\n",
	} {
		var c checked
		if err := Load(write(t, body), nil, &c); err != nil {
			t.Errorf("%q: %v", body, err)
		}
	}
	var c checked
	if err := Load(write(t, "peers:\n  - &p\n    max_bytes: 3\n  - *p\n"), nil, &c); err != nil || len(c.Peers) != 2 || c.Peers[1].MaxBytes != 3 {
		t.Fatalf("alias: %v %+v", err, c)
	}
}

func TestEditDistance(t *testing.T) {
	for _, c := range []struct {
		a, b string
		want int
	}{{"", "", 0}, {"a", "", 1}, {"sync_timout", "sync_timeout", 1}, {"gatway", "gateway", 1}, {"kitten", "sitting", 3}} {
		if got := EditDistance(c.a, c.b); got != c.want {
			t.Errorf("EditDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
}
