package api

import (
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// strictShape is what the walk needs of the type an object or an array
// is decoded into: a struct's json names with each one's type, or a
// map's, slice's or array's element type. Kind Invalid is anything (an
// interface, a type that decodes itself, or no type: keys unchecked).
type strictShape struct {
	kind   reflect.Kind // Struct, Map, Slice, Array or Invalid
	fields map[string]reflect.Type
	elem   reflect.Type
}

// elemOf is the element type when s is a container of kind (Map; Slice
// also for an array), else nil: anything.
func (s *strictShape) elemOf(kind reflect.Kind) reflect.Type {
	if s.kind == kind || kind == reflect.Slice && s.kind == reflect.Array {
		return s.elem
	}
	return nil
}

// unknown is the error for a key that names no field: with the field it
// only differs from in case, when there is one.
func (s *strictShape) unknown(key string) error {
	e := &strictError{what: fmt.Sprintf("unknown field %q", key)}
	for _, name := range slices.Sorted(maps.Keys(s.fields)) {
		if strings.EqualFold(name, key) {
			e.hint = fmt.Sprintf(" (did you mean %q?)", name)
			break
		}
	}
	return e
}

var (
	jsonUnmarshaler  = reflect.TypeFor[json.Unmarshaler]()
	strictAnything   = &strictShape{}
	strictShapeCache sync.Map // reflect.Type → *strictShape; the program's types bound it
)

// strictShapeOf is the shape of what a JSON object or array meant for t
// is decoded into: pointers followed; anything for an interface or a
// type with its own UnmarshalJSON.
func strictShapeOf(t reflect.Type) *strictShape {
	if t == nil {
		return strictAnything
	}
	if s, ok := strictShapeCache.Load(t); ok {
		return s.(*strictShape)
	}
	target := t
	for target.Kind() == reflect.Pointer && !target.Implements(jsonUnmarshaler) {
		target = target.Elem()
	}
	s := strictAnything
	switch {
	case target.Implements(jsonUnmarshaler) || reflect.PointerTo(target).Implements(jsonUnmarshaler):
	case target.Kind() == reflect.Struct:
		var all []strictField
		collectStrictFields(target, 0, map[reflect.Type]bool{}, &all)
		s = &strictShape{kind: reflect.Struct, fields: dominantFields(all)}
	case target.Kind() == reflect.Map, target.Kind() == reflect.Slice, target.Kind() == reflect.Array:
		s = &strictShape{kind: target.Kind(), elem: target.Elem()}
	}
	strictShapeCache.Store(t, s)
	return s
}

// strictField is one json name a struct can take, found depth embedded
// structs down; tagged when the name came from a json tag.
type strictField struct {
	name   string
	typ    reflect.Type
	depth  int
	tagged bool
}

// collectStrictFields lists t's json names as encoding/json's typeFields
// does: exported fields, "-" left out, an untagged embedded struct (or
// pointer to one) contributing its own fields one level down.
func collectStrictFields(t reflect.Type, depth int, visiting map[reflect.Type]bool, out *[]strictField) {
	if visiting[t] {
		return
	}
	visiting[t] = true
	defer delete(visiting, t)
	for i := range t.NumField() {
		sf := t.Field(i)
		ft := sf.Type
		if sf.Anonymous {
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if !sf.IsExported() && ft.Kind() != reflect.Struct {
				continue
			}
		} else if !sf.IsExported() {
			continue
		}
		tag := sf.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, _, _ := strings.Cut(tag, ",")
		if !validJSONTag(name) {
			name = ""
		}
		if ft = sf.Type; ft.Name() == "" && ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
			collectStrictFields(ft, depth+1, visiting, out)
			continue
		}
		tagged := name != ""
		if !tagged {
			name = sf.Name
		}
		*out = append(*out, strictField{name: name, typ: sf.Type, depth: depth, tagged: tagged})
	}
}

// dominantFields keeps, per name, the field encoding/json would fill: the
// shallowest, or among the shallowest the only tagged one; a name it
// cannot decide (encoding/json then ignores it) is left out.
func dominantFields(all []strictField) map[string]reflect.Type {
	best := map[string][]strictField{}
	for _, f := range all {
		cur := best[f.name]
		switch {
		case len(cur) == 0 || f.depth < cur[0].depth:
			best[f.name] = []strictField{f}
		case f.depth == cur[0].depth:
			best[f.name] = append(cur, f)
		}
	}
	out := make(map[string]reflect.Type, len(best))
	for name, fs := range best {
		var tagged []strictField
		for _, f := range fs {
			if f.tagged {
				tagged = append(tagged, f)
			}
		}
		switch {
		case len(fs) == 1:
			out[name] = fs[0].typ
		case len(tagged) == 1:
			out[name] = tagged[0].typ
		}
	}
	return out
}

// validJSONTag is encoding/json's isValidTag: a name it would use.
func validJSONTag(s string) bool {
	if s == "" {
		return false
	}
	for _, c := range s {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
