package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// EnvPrefix starts every environment override.
const EnvPrefix = "CAPGATE_"

// Validator is implemented by configuration structs that check themselves.
type Validator interface{ Validate() error }

// Retired is implemented by configurations that name settings they no
// longer have, each (a dotted path, e.g. "gateway.issuer") with what
// replaced it: a file or CAPGATE_* variable still setting one gets that
// answer instead of "unknown field".
type Retired interface{ RetiredSettings() map[string]string }

// Load fills dst (a pointer to a struct already holding its defaults) from
// the YAML file at path ("" for none), then from env (os.Environ() form),
// then validates it.
func Load(path string, env []string, dst any) error {
	retired := map[string]string{}
	if r, ok := dst.(Retired); ok {
		retired = r.RetiredSettings()
	}
	if path != "" {
		b, err := os.ReadFile(path)
		if err != nil {
			return fmt.Errorf("config: %w", err)
		}
		if err := retiredInFile(b, retired); err != nil {
			return fmt.Errorf("config: %s: %w", path, err)
		}
		if err := Decode(b, dst); err != nil {
			return fmt.Errorf("config: %s: %w", path, err)
		}
	}
	if err := retiredInEnv(env, retired); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if err := ApplyEnv(env, dst); err != nil {
		return fmt.Errorf("config: %w", err)
	}
	if v, ok := dst.(Validator); ok {
		if err := v.Validate(); err != nil {
			return fmt.Errorf("config: %w", err)
		}
	}
	return nil
}

// retiredInFile refuses a YAML document that sets a retired setting.
func retiredInFile(b []byte, retired map[string]string) error {
	if len(retired) == 0 {
		return nil
	}
	var tree map[string]any
	if yaml.Unmarshal(b, &tree) != nil {
		return nil // Decode reports the syntax error
	}
	for _, path := range sortedKeys(retired) {
		if hasPath(tree, strings.Split(path, ".")) {
			return fmt.Errorf("%s: no longer a setting: %s", path, retired[path])
		}
	}
	return nil
}

// retiredInEnv refuses a CAPGATE_* variable that sets a retired setting.
func retiredInEnv(env []string, retired map[string]string) error {
	set := map[string]bool{}
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		set[k] = true
	}
	for _, path := range sortedKeys(retired) {
		if name := EnvPrefix + strings.ToUpper(strings.ReplaceAll(path, ".", "_")); set[name] {
			return fmt.Errorf("%s (%s): no longer a setting: %s", name, path, retired[path])
		}
	}
	return nil
}

func hasPath(tree map[string]any, path []string) bool {
	v, ok := tree[path[0]]
	if !ok || len(path) == 1 {
		return ok
	}
	sub, ok := v.(map[string]any)
	return ok && hasPath(sub, path[1:])
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Decode reads YAML into dst, refusing unknown keys. Unknown keys and
// values of the wrong type are named by their setting's path and line,
// with what the setting wants (check.go).
func Decode(b []byte, dst any) error {
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		// a syntax error: yaml.v3 names the line, not what is wrong with it
		return fmt.Errorf("%w (YAML syntax: check the indentation on and above that line — spaces, not tabs, "+
			"each setting indented under its section — and that each setting is name: value)", err)
	}
	if err := check(&doc, reflect.TypeOf(dst)); err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	if err := dec.Decode(dst); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return nil
}

// ApplyEnv sets every field whose CAPGATE_* variable is present in env.
// A variable naming no setting is an error, so typos are not ignored.
func ApplyEnv(env []string, dst any) error {
	vars := map[string]string{}
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if ok && strings.HasPrefix(k, EnvPrefix) {
			vars[k] = v
		}
	}
	if len(vars) == 0 {
		return nil
	}
	fields := map[string]field{}
	collect(reflect.ValueOf(dst).Elem(), "", fields)
	names := make([]string, 0, len(vars))
	for k := range vars {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		f, ok := fields[k]
		if !ok {
			return fmt.Errorf("%s names no setting%s", k, suggestEnv(k, fields))
		}
		if err := setValue(f.v, vars[k]); err != nil {
			return fmt.Errorf("%s (%s): %w", k, f.path, err)
		}
	}
	return nil
}

// EnvNames are the variables ApplyEnv takes for dst's settings (dst a
// pointer to a struct), sorted.
func EnvNames(dst any) []string {
	fields := map[string]field{}
	collect(reflect.ValueOf(dst).Elem(), "", fields)
	return slices.Sorted(maps.Keys(fields))
}

// suggestEnv is the variable of fields a typo away from name, as the
// file's unknown keys are told (suggest): CAPGATE_COORDINATOR_DATADIR was
// "names no setting" and no more (newuser7). Names are long and share
// their prefix, so only a near miss (distance 2 at most) is offered.
func suggestEnv(name string, fields map[string]field) string {
	best, bestDistance := "", 3
	for known := range fields {
		if d := EditDistance(name, known); d < bestDistance || (d == bestDistance && known < best) {
			best, bestDistance = known, d
		}
	}
	if best == "" {
		return ""
	}
	return "; did you mean " + best + "?"
}

type field struct {
	path string
	v    reflect.Value
}

// collect maps env names to settable leaf fields, following yaml tags.
func collect(v reflect.Value, prefix string, out map[string]field) {
	t := v.Type()
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		fv := v.Field(i)
		if sf.IsExported() && opts == "inline" && fv.Kind() == reflect.Struct {
			collect(fv, prefix, out) // its fields sit at this level
			continue
		}
		if !sf.IsExported() || name == "-" || name == "" {
			continue
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		if fv.Kind() == reflect.Struct && fv.Type() != reflect.TypeOf(time.Time{}) {
			collect(fv, path, out)
			continue
		}
		env := EnvPrefix + strings.ToUpper(strings.NewReplacer(".", "_").Replace(path))
		out[env] = field{path: path, v: fv}
	}
}

var durationType = reflect.TypeOf(time.Duration(0))

func setValue(v reflect.Value, s string) error {
	if v.Type() == durationType {
		d, err := time.ParseDuration(s)
		if _, numeric := strconv.ParseFloat(s, 64); err != nil && numeric == nil {
			// Worded as the file's (check.go): Go's "time: missing
			// unit in duration" said nothing of what to write.
			return fmt.Errorf("%s is not a duration: write it with a unit, e.g. %ss", s, s)
		}
		if err != nil {
			return fmt.Errorf("want a duration such as 30s or 5m, got %q", s)
		}
		v.SetInt(int64(d))
		return nil
	}
	switch v.Kind() {
	case reflect.String:
		v.SetString(s)
	case reflect.Bool:
		b, err := strconv.ParseBool(s)
		if err != nil {
			return err
		}
		v.SetBool(b)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		n, err := strconv.ParseInt(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetInt(n)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		n, err := strconv.ParseUint(s, 10, v.Type().Bits())
		if err != nil {
			return err
		}
		v.SetUint(n)
	case reflect.Float64:
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		v.SetFloat(f)
	case reflect.Slice:
		return setSlice(v, s)
	default:
		return fmt.Errorf("cannot be set from the environment (kind %s)", v.Kind())
	}
	return nil
}

func setSlice(v reflect.Value, s string) error {
	parts := []string{}
	if s != "" {
		parts = strings.Split(s, ",")
	}
	out := reflect.MakeSlice(v.Type(), len(parts), len(parts))
	for i, p := range parts {
		if err := setValue(out.Index(i), strings.TrimSpace(p)); err != nil {
			return fmt.Errorf("item %d: %w", i, err)
		}
	}
	v.Set(out)
	return nil
}
