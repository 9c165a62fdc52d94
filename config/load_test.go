package config

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

type inner struct {
	SyncTimeout time.Duration `yaml:"sync_timeout"`
	Seeds       []string      `yaml:"seeds"`
	MaxBytes    int32         `yaml:"max_bytes"`
	Secret      string        `yaml:"secret"`
}

type sample struct {
	Cluster string `yaml:"cluster"`
	Gateway inner  `yaml:"gateway"`
	Debug   bool   `yaml:"debug"`
}

func (s sample) Validate() error {
	if s.Gateway.SyncTimeout <= 0 {
		return fmt.Errorf("gateway.sync_timeout: must be > 0, got %v", s.Gateway.SyncTimeout)
	}
	return nil
}

func defaults() sample {
	return sample{Cluster: "dev", Gateway: inner{SyncTimeout: 5 * time.Second, Seeds: []string{"a:1"}, MaxBytes: 10}}
}

func write(t *testing.T, body string) string {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestLoadLayers(t *testing.T) {
	c := defaults()
	p := write(t, "cluster: prod\ngateway:\n  sync_timeout: 7s\n  seeds: [b:2, c:3]\n")
	env := []string{"CAPGATE_GATEWAY_MAX_BYTES=99", "CAPGATE_DEBUG=true", "HOME=/root", "CAPGATE_GATEWAY_SEEDS=x:1, y:2"}
	if err := Load(p, env, &c); err != nil {
		t.Fatal(err)
	}
	want := sample{Cluster: "prod", Gateway: inner{SyncTimeout: 7 * time.Second, Seeds: []string{"x:1", "y:2"}, MaxBytes: 99}, Debug: true}
	if fmt.Sprint(c) != fmt.Sprint(want) {
		t.Fatalf("got %+v\nwant %+v", c, want)
	}
}

func TestLoadDefaultsOnly(t *testing.T) {
	c := defaults()
	if err := Load("", nil, &c); err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(c) != fmt.Sprint(defaults()) {
		t.Fatalf("defaults changed: %+v", c)
	}
}

func TestLoadErrorsNameTheField(t *testing.T) {
	cases := []struct {
		name, yaml string
		env        []string
		want       string
	}{
		{"unknown yaml key", "gateway:\n  sync_timeuot: 1s\n", nil, "sync_timeuot"},
		{"bad duration", "gateway:\n  sync_timeout: soon\n", nil, "soon"},
		{"unknown env", "", []string{"CAPGATE_GATEWAY_SYNC_TIMEUOT=1s"}, "CAPGATE_GATEWAY_SYNC_TIMEUOT names no setting"},
		{"bad env int", "", []string{"CAPGATE_GATEWAY_MAX_BYTES=lots"}, "gateway.max_bytes"},
		{"int overflow", "", []string{"CAPGATE_GATEWAY_MAX_BYTES=99999999999"}, "gateway.max_bytes"},
		{"validation", "gateway:\n  sync_timeout: 0s\n", nil, "gateway.sync_timeout: must be > 0, got 0s"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c := defaults()
			p := ""
			if tc.yaml != "" {
				p = write(t, tc.yaml)
			}
			err := Load(p, tc.env, &c)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to mention %q", err, tc.want)
			}
		})
	}
}
