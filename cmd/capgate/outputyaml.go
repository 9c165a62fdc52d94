package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"gopkg.in/yaml.v3"
)

// printYAML prints v as YAML (-o yaml): the same document -o json prints,
// its keys in the same order and numbers as JSON wrote them (an offset or
// a microsecond audit seq stays an integer, not 1.7e+15), and as safe for
// a terminal: a string holding a rune a terminal would obey is double
// quoted and the rune escaped (\uXXXX, YAML's escape as JSON's).
func printYAML(w io.Writer, v any) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	node, err := yamlNode(dec)
	if err != nil {
		return fmt.Errorf("yaml: %w", err)
	}
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(node); err != nil {
		return err
	}
	enc.Close()
	_, err = w.Write(jsonTerminalSafe(b.Bytes()))
	return err
}

// yamlNode reads the next JSON value of dec as a YAML node.
func yamlNode(dec *json.Decoder) (*yaml.Node, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case json.Delim:
		n := &yaml.Node{Kind: yaml.SequenceNode, Tag: "!!seq"}
		if t == '{' {
			n.Kind, n.Tag = yaml.MappingNode, "!!map"
		}
		for dec.More() {
			if n.Kind == yaml.MappingNode {
				key, err := dec.Token()
				if err != nil {
					return nil, err
				}
				n.Content = append(n.Content, yamlString(key.(string)))
			}
			child, err := yamlNode(dec)
			if err != nil {
				return nil, err
			}
			n.Content = append(n.Content, child)
		}
		_, err := dec.Token() // the closing delimiter
		return n, err
	case string:
		return yamlString(t), nil
	case json.Number:
		tag := "!!int"
		if _, err := t.Int64(); err != nil {
			tag = "!!float"
		}
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: tag, Value: t.String()}, nil
	case bool:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!bool", Value: fmt.Sprint(t)}, nil
	case nil:
		return &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!null", Value: "null"}, nil
	}
	return nil, errors.New("unexpected JSON token")
}

// yamlString is s as a YAML string, double quoted when it holds a rune
// a terminal would obey (printYAML escapes it).
func yamlString(s string) *yaml.Node {
	n := &yaml.Node{Kind: yaml.ScalarNode, Tag: "!!str", Value: s}
	if !safeText(s) {
		n.Style = yaml.DoubleQuotedStyle
	}
	return n
}
