package config

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// checkErrorsMax bounds how many problems one file reports.
const checkErrorsMax = 20

// check walks a parsed YAML document against the type Decode fills (its
// yaml tags) before decoding, so a mistake is named by its setting's path
// and line in the file's words ("gateway.sync_timout (line 3): unknown
// setting; did you mean sync_timeout?") rather than by yaml.v3's Go type
// names ("field sync_timout not found in type gateway.Config"). It reports
// what Decode (KnownFields) would refuse: unknown keys and values of the
// wrong shape or type; Decode remains the authority for anything else.
func check(doc *yaml.Node, t reflect.Type) error {
	c := &checker{root: t}
	if doc.Kind == yaml.DocumentNode {
		if len(doc.Content) == 0 {
			return nil
		}
		doc = doc.Content[0]
	}
	c.node(doc, t, "")
	if len(c.errs) > checkErrorsMax {
		c.errs = append(c.errs[:checkErrorsMax], fmt.Errorf("(and %d more)", len(c.errs)-checkErrorsMax))
	}
	return errors.Join(c.errs...)
}

type checker struct {
	root reflect.Type // the file's type: its sections (sectionOf)
	errs []error
}

func (c *checker) fail(n *yaml.Node, path, format string, args ...any) {
	if path == "" {
		path = "the file"
	}
	c.errs = append(c.errs, fmt.Errorf("%s (line %d): %s", path, n.Line, fmt.Sprintf(format, args...)))
}

var (
	timeType        = reflect.TypeOf(time.Time{})
	unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()
)

func (c *checker) node(n *yaml.Node, t reflect.Type, path string) {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if n.Kind == 0 || isNull(n) || reflect.PointerTo(t).Implements(unmarshalerType) {
		return // null leaves the default; a custom type checks itself
	}
	switch {
	case t.Kind() == reflect.Struct && t != timeType:
		c.mapping(n, t, path)
	case t.Kind() == reflect.Map:
		if n.Kind != yaml.MappingNode {
			c.fail(n, path, "want a map of name: value, got %s", describe(n))
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			c.node(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value))
		}
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		if n.Kind != yaml.SequenceNode {
			c.fail(n, path, "want a list such as [a, b], got %s", describe(n))
			return
		}
		for i, item := range n.Content {
			c.node(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		c.scalar(n, t, path)
	}
}

// mapping checks a struct's keys (unknown ones suggest the closest known
// key) and each value against its field.
func (c *checker) mapping(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.MappingNode {
		c.fail(n, path, "want a map of settings (name: value), got %s", describe(n))
		return
	}
	fields := map[string]reflect.Type{}
	structFields(t, fields)
	for i := 0; i+1 < len(n.Content); i += 2 {
		key, value := n.Content[i], n.Content[i+1]
		ft, ok := fields[key.Value]
		if !ok {
			hint := c.sectionOf(path, key.Value)
			if hint == "" {
				hint = suggest(key.Value, fields)
			}
			c.fail(key, join(path, key.Value), "unknown setting%s", hint)
			continue
		}
		c.node(value, ft, join(path, key.Value))
	}
}

// sectionOf says which other top-level section has key, when one does
// and path is a top-level section: `kafka_listen` under coordinator: was
// "did you mean kafka_state?", where it is a gateway setting.
func (c *checker) sectionOf(path, key string) string {
	root := c.root
	for root.Kind() == reflect.Pointer {
		root = root.Elem()
	}
	if path == "" || strings.Contains(path, ".") || root.Kind() != reflect.Struct {
		return ""
	}
	sections := map[string]reflect.Type{}
	structFields(root, sections)
	for _, name := range sortedNames(sections) {
		t := sections[name]
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if name == path || t.Kind() != reflect.Struct || t == timeType {
			continue
		}
		fields := map[string]reflect.Type{}
		structFields(t, fields)
		if _, ok := fields[key]; ok {
			return fmt.Sprintf("; %s is a %s setting: put it under %s:", key, name, name)
		}
	}
	return ""
}

func sortedNames(m map[string]reflect.Type) []string {
	names := make([]string, 0, len(m))
	for name := range m {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// structFields maps yaml keys to field types the way yaml.v3 does:
// the tag's name, else the lower-cased field name; inline structs' fields
// sit at this level.
func structFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		if !sf.IsExported() && !sf.Anonymous {
			continue
		}
		name, opts, _ := strings.Cut(sf.Tag.Get("yaml"), ",")
		if name == "-" {
			continue
		}
		if strings.Contains(","+opts+",", ",inline,") && sf.Type.Kind() == reflect.Struct {
			structFields(sf.Type, out)
			continue
		}
		if name == "" {
			name = strings.ToLower(sf.Name)
		}
		out[name] = sf.Type
	}
}

// scalar decodes a leaf the way Decode will and, when it refuses, says
// what the setting wants in place of yaml.v3's Go type name.
func (c *checker) scalar(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind != yaml.ScalarNode {
		c.fail(n, path, "want %s, got %s", want(t), describe(n))
		return
	}
	if n.Decode(reflect.New(t).Interface()) == nil {
		return
	}
	if t == durationType {
		if _, err := strconv.ParseFloat(n.Value, 64); err == nil {
			c.fail(n, path, "%s is not a duration: write it with a unit, e.g. %ss", n.Value, n.Value)
			return
		}
	}
	c.fail(n, path, "want %s, got %s", want(t), describe(n))
}

// want names what a leaf of type t takes, in the file's words.
func want(t reflect.Type) string {
	if t == durationType {
		return "a duration such as 30s or 5m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return fmt.Sprintf("a whole number (%d-bit)", t.Bits())
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return fmt.Sprintf("a whole number ≥ 0 (%d-bit)", t.Bits())
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a single value (text)"
	case reflect.Struct:
		if t == timeType {
			return "a time such as 2026-01-02T15:04:05Z"
		}
	}
	return "a single value"
}

// describe shows what the file holds at n, quoted and shortened.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.MappingNode:
		return "a map"
	}
	v := n.Value
	if r := []rune(v); len(r) > 60 {
		v = string(r[:60]) + "…"
	}
	return strconv.Quote(v)
}

func isNull(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

// suggest names the known key closest to key by edit distance, when it is
// close enough to be the intended one.
func suggest(key string, known map[string]reflect.Type) string {
	best, bestDistance := "", -1
	for name := range known {
		d := EditDistance(key, name)
		if bestDistance < 0 || d < bestDistance || (d == bestDistance && name < best) {
			best, bestDistance = name, d
		}
	}
	if best == "" || bestDistance > max(2, len(key)/3) {
		return ""
	}
	return "; did you mean " + best + "?"
}

// EditDistance is the Levenshtein distance between a and b (bytes; keys
// are ASCII). The CLI's flag suggestions use it too.
func EditDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}
