package apicheck

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"sort"
	"strconv"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/capgate/capgate/api"
)

// Load parses the embedded api/openapi.yaml with kin-openapi and
// validates it as OpenAPI 3.1 (kin-openapi ≥ v0.150 validates 3.1
// documents: JSON Schema 2020-12 keywords, type arrays, mutualTLS).
func Load() (*openapi3.T, error) {
	loader := openapi3.NewLoader()
	doc, err := loader.LoadFromData(api.OpenAPIYAML)
	if err != nil {
		return nil, fmt.Errorf("apicheck: load openapi.yaml: %w", err)
	}
	if !strings.HasPrefix(doc.OpenAPI, "3.1.") {
		return nil, fmt.Errorf("apicheck: openapi %q, want 3.1.x", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("apicheck: openapi.yaml does not validate: %w", err)
	}
	return doc, nil
}

// Operation is one documented operation.
type Operation struct {
	ID      string
	Method  string
	Path    string           // as documented, e.g. /v1/groups/{group}/join
	Servers []string         // x-capgate-servers
	Codes   map[int][]string // status → x-capgate-codes (sorted; nil for 2xx)
	Op      *openapi3.Operation
}

// Statuses are the documented statuses, sorted.
func (o Operation) Statuses() []int {
	var out []int
	for s := range o.Codes {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

// Operations lists the document's operations by operationId.
func Operations(doc *openapi3.T) (map[string]Operation, error) {
	out := map[string]Operation{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			o := Operation{ID: op.OperationID, Method: method, Path: path, Codes: map[int][]string{}, Op: op}
			if o.ID == "" {
				return nil, fmt.Errorf("%s %s: no operationId", method, path)
			}
			if _, dup := out[o.ID]; dup {
				return nil, fmt.Errorf("operationId %s twice", o.ID)
			}
			if err := extension(op.Extensions, "x-capgate-servers", &o.Servers); err != nil || len(o.Servers) == 0 {
				return nil, fmt.Errorf("%s: x-capgate-servers: %v", o.ID, err)
			}
			for status, resp := range op.Responses.Map() {
				code, err := strconv.Atoi(status)
				if err != nil {
					return nil, fmt.Errorf("%s: response %q is not a status", o.ID, status)
				}
				var codes []string
				if resp.Value != nil {
					if err := extension(resp.Value.Extensions, "x-capgate-codes", &codes); err != nil {
						return nil, fmt.Errorf("%s %d: %w", o.ID, code, err)
					}
				}
				if (code >= 400) != (len(codes) > 0) {
					return nil, fmt.Errorf("%s %d: x-capgate-codes must list the codes of an error status, and only there", o.ID, code)
				}
				sort.Strings(codes)
				o.Codes[code] = codes
			}
			out[o.ID] = o
		}
	}
	return out, nil
}

// EveryOperationCodes are the common errors every operation documents
// itself: they answer a request that reached the operation (its path and
// method) but was too large, so a validator that reads only the
// operation's responses knows them too. The others of
// x-capgate-common-errors answer requests that reach no operation (no
// route, another method, malformed HTTP).
var EveryOperationCodes = []string{string(api.CodeBodyTooLarge), string(api.CodeHeadersTooLarge)}

// CommonErrors is the document's x-capgate-common-errors of server.
func CommonErrors(doc *openapi3.T, server string) ([]string, error) {
	var all map[string][]string
	if err := extension(doc.Extensions, "x-capgate-common-errors", &all); err != nil {
		return nil, err
	}
	codes := all[server]
	sort.Strings(codes)
	return codes, nil
}

func extension(ext map[string]any, name string, dst any) error {
	v, ok := ext[name]
	if !ok {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, dst)
}

var pathParam = regexp.MustCompile(`\{[^}]*\}`)

// SamePath compares path templates ignoring parameter names.
func SamePath(a, b string) bool {
	return pathParam.ReplaceAllString(a, "{}") == pathParam.ReplaceAllString(b, "{}")
}
