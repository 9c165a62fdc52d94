package main

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"
)

// TestOutputYAML: -o yaml prints the document -o json prints — read back,
// the same values, keys in the same order — with integers as integers
// (an audit seq of 16 digits, not 1.796559134952679e+15), and nothing a
// terminal would obey: an escape or a bidi override in a server's text is
// a \u escape in a double-quoted string. -o takes table, json or yaml
// (usage error otherwise), and version prints YAML with it.
func TestOutputYAML(t *testing.T) {
	doc := map[string]any{
		"seq":     int64(1796559134952679),
		"ratio":   0.25,
		"reason":  "ok\x1b[2J\u202ehidden",
		"at":      "2026-12-06T12:27:10.942Z",
		"entries": []any{map[string]any{"b": true, "a": nil}, "x"},
		"empty":   []any{},
	}
	var b bytes.Buffer
	if err := printYAML(&b, doc); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(out, "\x1b\u202e") || !strings.Contains(out, `reason: "ok\e[2J\u202ehidden"`) {
		t.Errorf("a terminal would obey what -o yaml printed:\n%s", out)
	}
	if !strings.Contains(out, "seq: 1796559134952679\n") || !strings.Contains(out, "ratio: 0.25\n") {
		t.Errorf("numbers not as JSON writes them:\n%s", out)
	}
	var fromYAML, fromJSON any
	if err := yaml.Unmarshal(b.Bytes(), &fromYAML); err != nil {
		t.Fatalf("-o yaml is no YAML: %v\n%s", err, out)
	}
	raw, _ := json.Marshal(doc)
	json.Unmarshal(raw, &fromJSON)
	normalized, _ := json.Marshal(fromYAML)
	var back any
	json.Unmarshal(normalized, &back)
	if !reflect.DeepEqual(back, fromJSON) {
		t.Errorf("-o yaml read back %v, -o json is %v", back, fromJSON)
	}

	if out, err := run(t, "version", "-o", "yaml"); err != nil || !strings.Contains(out, "platform: ") || strings.Contains(out, "{") {
		t.Errorf("version -o yaml: %v\n%s", err, out)
	}
	if _, err := run(t, "admin", "groups", "-o", "xml"); err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), "want table, json or yaml") {
		t.Errorf("admin groups -o xml: %v (exit %d), want a usage error naming table, json and yaml", err, exitCode(err))
	}
}
