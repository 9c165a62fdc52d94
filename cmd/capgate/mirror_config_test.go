package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestMirrorOffsetsNeedAPrefixOrTheOptOut (redteam7 #5): mirror_offsets
// alone mirrors into capgate.<group>; an empty mirror_offsets_prefix (as
// a copy of an older config.example.yaml has) with mirror_offsets is
// refused at load, naming the setting and both fixes; the opt-out
// mirror_offsets_unprefixed loads, from the file or from CAPGATE_*. README
// shows the refusal word for word.
func TestMirrorOffsetsNeedAPrefixOrTheOptOut(t *testing.T) {
	cases := []struct {
		file string
		env  map[string]string
		want string // "" loads
	}{
		{file: "coordinator:\n  mirror_offsets: true\n"},
		{file: "coordinator:\n  mirror_offsets: true\n  mirror_offsets_prefix: prod.\n"},
		{file: "coordinator:\n  mirror_offsets: false\n  mirror_offsets_prefix: \"\"\n"},
		{file: "coordinator:\n  mirror_offsets: true\n  mirror_offsets_prefix: \"\"\n  mirror_offsets_unprefixed: true\n"},
		{file: "coordinator:\n  mirror_offsets: true\n  mirror_offsets_prefix: \"\"\n",
			env: map[string]string{"CAPGATE_COORDINATOR_MIRROR_OFFSETS_UNPREFIXED": "true"}},
		{file: "coordinator:\n  mirror_offsets: true\n  mirror_offsets_prefix: \"\"\n",
			want: `config: coordinator: mirror_offsets_prefix: empty with mirror_offsets: true would write each group's offsets under its own name in Kafka, ` +
				`where a tenant can take a native consumer group's name before the native app first commits (or after Kafka expired its offsets) ` +
				`and choose where it starts: set mirror_offsets_prefix (default "capgate."), or set mirror_offsets_unprefixed: true to accept that`},
		{file: "coordinator:\n  mirror_offsets: true\n", env: map[string]string{"CAPGATE_COORDINATOR_MIRROR_OFFSETS_PREFIX": ""},
			want: `config: coordinator: mirror_offsets_prefix: empty with mirror_offsets: true`},
		{file: "coordinator:\n  mirror_offsets: true\n  mirror_offsets_unprefixed: true\n",
			want: `config: coordinator: mirror_offsets_unprefixed: true mirrors each group under its own name, but mirror_offsets_prefix is "capgate.": ` +
				`set mirror_offsets_prefix: "" as well, or remove mirror_offsets_unprefixed to write "capgate." + group`},
	}
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	if refusal := cases[5].want; !strings.Contains(string(readme), "\n"+refusal+"\n") {
		t.Errorf("README does not show the refusal as capgate prints it:\n%s", refusal)
	}
	for _, c := range cases {
		t.Run("", func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			path := filepath.Join(t.TempDir(), "capgate.yaml")
			if err := os.WriteFile(path, []byte(c.file), 0o600); err != nil {
				t.Fatal(err)
			}
			cfg, err := loadConfig(path, "coordinator")
			switch {
			case c.want == "" && err != nil:
				t.Fatalf("%q %v: %v, want it loaded", c.file, c.env, err)
			case c.want != "" && (err == nil || !strings.HasPrefix(err.Error(), c.want)):
				t.Fatalf("%q %v:\n got  %v\n want %s", c.file, c.env, err, c.want)
			case c.want == "" && cfg.Coordinator.MirrorOffsets && cfg.Coordinator.MirrorOffsetsPrefix == "" && !cfg.Coordinator.MirrorOffsetsUnprefixed:
				t.Fatalf("%q %v: loaded an unprefixed mirror without the opt-out", c.file, c.env)
			}
		})
	}
}
