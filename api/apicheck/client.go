package apicheck

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"

	"github.com/capgate/capgate/api"
)

// The raw fetch's answer (api.MediaRecordBatch) is bytes. kin-openapi
// has no decoder for a vendor type and refused every raw answer as
// "unsupported content type", so no test held it (its status, its
// Capgate-Next-Offset and Capgate-High-Watermark headers) to the
// document.
func init() {
	openapi3filter.RegisterBodyDecoder(api.MediaRecordBatch, openapi3filter.FileBodyDecoder)
}

// Client sends requests built from the document: the operation's method
// and path template, and it validates every request and every answer
// against the document with kin-openapi's openapi3filter (parameters,
// bodies, documented status, and the error code among the status's
// x-capgate-codes). It is the "client generated from the document" of
// the contract tests.
type Client struct {
	Doc   *openapi3.T
	Ops   map[string]Operation
	HTTP  *http.Client
	Bases map[string]string // server name (x-capgate-servers) → base URL
}

// NewClient loads the document and returns a client for bases.
func NewClient(hc *http.Client, bases map[string]string) (*Client, error) {
	doc, err := Load()
	if err != nil {
		return nil, err
	}
	ops, err := Operations(doc)
	if err != nil {
		return nil, err
	}
	return &Client{Doc: doc, Ops: ops, HTTP: hc, Bases: bases}, nil
}

// Call is one request by operationId.
type Call struct {
	Op     string
	Server string            // which process; default the operation's first
	Path   map[string]string // path parameters by their documented names
	Query  url.Values
	Bearer string
	Body   any // JSON-encoded unless []byte
	// ContentType of a []byte Body (default application/json).
	ContentType string
	Accept      string
	// Unchecked sends the request as given, without validating it
	// against the document (an attack's, a malformed one): only the
	// answer is held to the document.
	Unchecked bool
	// Header holds extra request headers (after the ones above).
	Header http.Header
}

// Response is a validated answer.
type Response struct {
	Status int
	Header http.Header
	Body   []byte
	Code   api.Code // the error code of a 4xx/5xx
}

// Do sends c and validates both ways; an error means the request or the
// answer does not fit the document (or the request failed).
func (cl *Client) Do(ctx context.Context, c Call) (Response, error) {
	op, ok := cl.Ops[c.Op]
	if !ok {
		return Response{}, fmt.Errorf("apicheck: no operation %q in the document", c.Op)
	}
	server := c.Server
	if server == "" {
		server = op.Servers[0]
	}
	req, body, err := cl.request(ctx, op, server, c)
	if err != nil {
		return Response{}, err
	}
	route := &routers.Route{Spec: cl.Doc, Path: op.Path, PathItem: cl.Doc.Paths.Find(op.Path), Method: op.Method, Operation: op.Op}
	opts := &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc}
	in := &openapi3filter.RequestValidationInput{Request: req, PathParams: c.Path, Route: route, Options: opts}
	if !c.Unchecked {
		if err := openapi3filter.ValidateRequest(ctx, in); err != nil {
			return Response{}, fmt.Errorf("apicheck: %s: the request does not fit the document: %w", c.Op, err)
		}
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	resp, err := cl.HTTP.Do(req)
	if err != nil {
		return Response{}, fmt.Errorf("apicheck: %s: %w", c.Op, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return Response{}, fmt.Errorf("apicheck: %s: read answer: %w", c.Op, err)
	}
	out := Response{Status: resp.StatusCode, Header: resp.Header, Body: got}
	return out, cl.checkAnswer(ctx, op, server, in, opts, &out)
}

func (cl *Client) request(ctx context.Context, op Operation, server string, c Call) (*http.Request, []byte, error) {
	base, ok := cl.Bases[server]
	if !ok || !slices.Contains(op.Servers, server) {
		return nil, nil, fmt.Errorf("apicheck: %s is not served by %q (or no base URL for it)", c.Op, server)
	}
	path := op.Path
	for name, v := range c.Path {
		path = strings.ReplaceAll(path, "{"+name+"}", url.PathEscape(v))
	}
	u := strings.TrimRight(base, "/") + path
	if len(c.Query) > 0 {
		u += "?" + c.Query.Encode()
	}
	var body []byte
	switch b := c.Body.(type) {
	case nil:
	case []byte:
		body = b
	default:
		var err error
		if body, err = json.Marshal(b); err != nil {
			return nil, nil, err
		}
	}
	req, err := http.NewRequestWithContext(ctx, op.Method, u, bytes.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if body != nil {
		ct := c.ContentType
		if ct == "" {
			ct = api.MediaJSON
		}
		req.Header.Set("Content-Type", ct)
	}
	if c.Bearer != "" {
		req.Header.Set("Authorization", "Bearer "+c.Bearer)
	}
	if c.Accept != "" {
		req.Header.Set("Accept", c.Accept)
	}
	for k, vs := range c.Header {
		req.Header.Del(k)
		for _, v := range vs {
			req.Header.Add(k, v)
		}
	}
	return req, body, nil
}

// checkAnswer validates the answer against the operation's responses.
// An error status or code the operation does not list may still be one
// of the server's x-capgate-common-errors, which the document says any
// request may get (its body is then an ErrorBody with one of those
// codes).
func (cl *Client) checkAnswer(ctx context.Context, op Operation, server string, in *openapi3filter.RequestValidationInput, opts *openapi3filter.Options, out *Response) error {
	codes, documented := op.Codes[out.Status]
	codes = append(slices.Clip(codes), cl.commonCodes(server, out.Status)...) // e.g. 503 overloaded besides an operation's own 503s
	if len(codes) == 0 && !documented {
		return fmt.Errorf("apicheck: %s answered %d, which the document does not list (%v): %.300s", op.ID, out.Status, op.Statuses(), out.Body)
	}
	if out.Status >= 400 && op.Method != http.MethodHead { // a HEAD answer has no body to carry a code
		var oauth struct{ Error any }
		var eb api.ErrorBody
		if err := json.Unmarshal(out.Body, &oauth); err != nil {
			return fmt.Errorf("apicheck: %s %d: error body: %w", op.ID, out.Status, err)
		}
		if code, ok := oauth.Error.(string); ok {
			out.Code = api.Code(code) // an RFC 6749 body: {"error":"invalid_client"}
		} else if err := json.Unmarshal(out.Body, &eb); err == nil {
			out.Code = eb.Error.Code
		}
		if !slices.Contains(codes, string(out.Code)) {
			return fmt.Errorf("apicheck: %s %d: code %s is not among the documented %v", op.ID, out.Status, out.Code, codes)
		}
	}
	rin := &openapi3filter.ResponseValidationInput{RequestValidationInput: in, Status: out.Status, Header: out.Header, Options: opts}
	rin.SetBodyBytes(out.Body)
	if err := openapi3filter.ValidateResponse(ctx, rin); err != nil {
		return fmt.Errorf("apicheck: %s %d: the answer does not fit the document: %w", op.ID, out.Status, err)
	}
	return nil
}

// commonCodes are the server's x-capgate-common-errors of status.
func (cl *Client) commonCodes(server string, status int) []string {
	common, err := CommonErrors(cl.Doc, server)
	if err != nil {
		return nil
	}
	var out []string
	for _, c := range common {
		if api.Code(c).Status() == status {
			out = append(out, c)
		}
	}
	return out
}
