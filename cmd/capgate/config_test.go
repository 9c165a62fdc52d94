package main

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/capgate/capgate/config"
)

// TestExampleConfigIsTheDefaults keeps config.example.yaml true: it
// decodes strictly, every value in it is the default, and every setting of
// the configuration structs appears in it.
func TestExampleConfigIsTheDefaults(t *testing.T) {
	b, err := os.ReadFile("../../config.example.yaml")
	if err != nil {
		t.Fatal(err)
	}
	got := defaultFileConfig()
	got.Coordinator.ID, got.Gateway.Listen = "changed", "changed" // must come back from the file
	if err := config.Decode(b, &got); err != nil {
		t.Fatalf("example does not decode: %v", err)
	}
	gotYAML, _ := yaml.Marshal(got)
	wantYAML, _ := yaml.Marshal(defaultFileConfig())
	if string(gotYAML) != string(wantYAML) {
		t.Fatalf("example differs from the defaults:\n got %s\nwant %s", gotYAML, wantYAML)
	}
	var tree map[string]any
	if err := yaml.Unmarshal(b, &tree); err != nil {
		t.Fatal(err)
	}
	inFile := map[string]bool{}
	flatten("", tree, inFile)
	var missing []string
	for _, path := range settingPaths("", reflect.TypeOf(fileConfig{})) {
		if !inFile[path] {
			missing = append(missing, path)
		}
	}
	sort.Strings(missing)
	if len(missing) > 0 {
		t.Fatalf("config.example.yaml lacks: %s", strings.Join(missing, ", "))
	}
}

func flatten(prefix string, v any, out map[string]bool) {
	m, ok := v.(map[string]any)
	if !ok {
		out[prefix] = true
		return
	}
	for k, child := range m {
		p := k
		if prefix != "" {
			p = prefix + "." + k
		}
		flatten(p, child, out)
	}
}

func settingPaths(prefix string, t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if f.IsExported() && opts == "inline" && f.Type.Kind() == reflect.Struct {
			out = append(out, settingPaths(prefix, f.Type)...)
			continue
		}
		if !f.IsExported() || name == "" || name == "-" {
			continue
		}
		p := name
		if prefix != "" {
			p = prefix + "." + name
		}
		if f.Type.Kind() == reflect.Struct {
			out = append(out, settingPaths(p, f.Type)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

func TestLoadConfigEnvAndErrors(t *testing.T) {
	t.Setenv("CAPGATE_GATEWAY_SYNC_TIMEOUT", "7s")
	t.Setenv("CAPGATE_GATEWAY_TLS_RELOAD_INTERVAL", "9s") // an inline field: gateway.tls.reload_interval
	t.Setenv("CAPGATE_ADMIN_TOKEN", "not-a-setting-but-a-cli-variable")
	t.Setenv("CAPGATE_CACERT", "a CLI variable too")
	cfg, err := loadConfig("", "gateway")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Gateway.SyncTimeout.String() != "7s" || cfg.Gateway.TLS.ReloadInterval.String() != "9s" {
		t.Fatalf("sync_timeout = %v, tls.reload_interval = %v", cfg.Gateway.SyncTimeout, cfg.Gateway.TLS.ReloadInterval)
	}
	t.Setenv("CAPGATE_GATEWAY_SYNC_TIMEOUT", "0s")
	if _, err := loadConfig("", "gateway"); err == nil || !strings.Contains(err.Error(), "sync_timeout") {
		t.Fatalf("err = %v, want it to name sync_timeout", err)
	}
	t.Setenv("CAPGATE_GATEWAY_SYNC_TIMEOUT", "7s")
	t.Setenv("CAPGATE_LOG_LEVEL", "loud")
	if _, err := loadConfig("", "gateway"); err == nil || !strings.Contains(err.Error(), "log.level") {
		t.Fatalf("err = %v, want it to name log.level", err)
	}
}

// TestRetiredSettingsSayWhatReplacedThem: a file or environment still
// naming a setting that is gone (the gateway's issuer, audience, leeway
// and max_lease, learned from the coordinator now; the groups: copies of
// the token lifetimes) gets an error naming it and what replaced it.
func TestRetiredSettingsSayWhatReplacedThem(t *testing.T) {
	cases := []struct {
		file, env, want string
	}{
		{file: "gateway:\n  issuer: capgate-coordinator\n", want: "gateway.issuer: no longer a setting: the gateway learns it from the coordinator on every sync reset (coordinator.id)"},
		{file: "gateway:\n  max_lease: 10m\n", want: "gateway.max_lease: no longer a setting: the gateway learns it"},
		{file: "coordinator:\n  groups:\n    leeway: 0s\n", want: "coordinator.groups.leeway: no longer a setting: coordinator.leeway is set once at the top level"},
		{file: "coordinator:\n  groups:\n    capability_lease: 0s\n", want: "coordinator.groups.capability_lease: no longer a setting"},
		{env: "CAPGATE_GATEWAY_AUDIENCE=dev", want: "CAPGATE_GATEWAY_AUDIENCE (gateway.audience): no longer a setting: the gateway learns it from the coordinator on every sync reset (coordinator.cluster)"},
	}
	for _, c := range cases {
		path := ""
		if c.file != "" {
			path = t.TempDir() + "/capgate.yaml"
			if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		var env []string
		if c.env != "" {
			env = []string{c.env}
		}
		cfg := defaultFileConfig()
		err := config.Load(path, env, &cfg)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("file %q env %q: %v; want %q", c.file, c.env, err, c.want)
		}
	}
}
