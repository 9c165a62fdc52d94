package api

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"sync"

	"gopkg.in/yaml.v3"
)

// OpenAPIYAML is the API contract (api/openapi.yaml, OpenAPI 3.1): every
// route of the coordinator and the gateway, its statuses and error codes.
// Tests walk the routers against it.
//
//go:embed openapi.yaml
var OpenAPIYAML []byte

var openAPIJSON = sync.OnceValues(func() ([]byte, error) {
	var doc any
	if err := yaml.Unmarshal(OpenAPIYAML, &doc); err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	doc, err := jsonValue(doc)
	if err != nil {
		return nil, fmt.Errorf("api: openapi.yaml: %w", err)
	}
	return json.Marshal(doc)
})

// Route is one entry of a process's route table: Name is the
// operationId in the document, Path the OpenAPI path template.
type Route struct{ Name, Method, Path string }

// OpenAPIJSON is the document as JSON, served at GET /openapi.json:
// one slice for the process, which the servers hand to fasthttp
// uncopied (SetBodyRaw) and nothing may change. Copied into each answer
// (~190 KB), anyone's slow readers made a server hold that much a
// connection: 1,000 connections of one address, ~190 MB (redteam15).
func OpenAPIJSON() []byte {
	b, err := openAPIJSON()
	if err != nil {
		panic(err) // the embedded document is checked by tests
	}
	return b[:len(b):len(b)] // an append copies
}

// jsonValue turns what yaml.v3 decodes into values encoding/json takes:
// every mapping key must be a string.
func jsonValue(v any) (any, error) {
	switch v := v.(type) {
	case map[string]any:
		for k, child := range v {
			c, err := jsonValue(child)
			if err != nil {
				return nil, err
			}
			v[k] = c
		}
		return v, nil
	case map[any]any:
		out := make(map[string]any, len(v))
		for k, child := range v {
			key, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("mapping key %v is not a string (quote status codes)", k)
			}
			c, err := jsonValue(child)
			if err != nil {
				return nil, err
			}
			out[key] = c
		}
		return out, nil
	case []any:
		for i, child := range v {
			c, err := jsonValue(child)
			if err != nil {
				return nil, err
			}
			v[i] = c
		}
		return v, nil
	}
	return v, nil
}
