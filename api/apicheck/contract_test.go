package apicheck_test

import (
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/api/apicheck"
	"github.com/capgate/capgate/coordinator"
	"github.com/capgate/capgate/coordinator/leader"
	"github.com/capgate/capgate/gateway"
)

// server is one process whose router the document describes.
type server struct {
	name   string
	routes []api.Route
	router string   // the route-table function, for the entries
	common []string // functions answering before or around any route
	// standby answers, on a coordinator replica that does not lead, every
	// route leader.View.Route does not serve there (421 not_leader with
	// the leader): what each such route documents too.
	standby []string
}

func servers() []*server {
	return []*server{
		{name: "coordinator", routes: coordinator.RouteTable(coordinator.DefaultConfig()),
			router: apicheck.FuncKey("coordinator", "Coordinator.newRouter"),
			common: []string{apicheck.FuncKey("coordinator", "router.dispatch"), apicheck.FuncKey("coordinator", "Coordinator.serveError"),
				apicheck.FuncKey("coordinator", "Coordinator.acceptable"), connectionRefusals},
			standby: []string{apicheck.FuncKey("coordinator", "writeNotLeader")}},
		{name: "gateway", routes: gateway.RouteTable(gateway.DefaultConfig()),
			router: apicheck.FuncKey("gateway", "Gateway.newRoutes"),
			common: []string{apicheck.FuncKey("gateway", "Gateway.serve"), apicheck.FuncKey("gateway", "Gateway.answerUnreadable"), connectionRefusals}},
	}
}

// connectionRefusals answers a connection over max_connections or
// max_connections_per_address before any route (both servers).
var connectionRefusals = apicheck.FuncKey("internal/connguard", "OverloadedAnswers")

// status is a code's fixed status: the reject table's, or the token
// endpoint's for its OAuth2 errors.
func status(code string) int {
	if s, ok := coordinator.OAuthErrorStatus(code); ok {
		return s
	}
	return api.Code(code).Status()
}

// TestDocumentValidates: api/openapi.yaml is OpenAPI 3.1 that kin-openapi
// validates, every operation says who serves it and which codes each
// error status carries, and the Code enum is the reject table.
func TestDocumentValidates(t *testing.T) {
	doc, ops := loadDocument(t)
	for _, o := range ops {
		for st, codes := range o.Codes {
			for _, c := range codes {
				if status(c) != st {
					t.Errorf("%s: code %s documented under %d, its status is %d", o.ID, c, st, status(c))
				}
			}
		}
	}
	var enum []string
	for _, v := range doc.Components.Schemas["Code"].Value.Enum {
		enum = append(enum, v.(string))
	}
	sort.Strings(enum)
	if want := api.Codes(); !slices.Equal(enum, want) {
		t.Errorf("schema Code enum %v, the reject table has %v", enum, want)
	}
}

// TestRoutersMatchDocument walks the coordinator's and the gateway's
// real route tables against the document, both ways: every route is
// documented with its method and path, every documented operation is
// routed by the processes it names, and each operation's statuses and
// error codes are exactly what its handlers can answer (found in the
// source by apicheck; union over the processes serving it).
func TestRoutersMatchDocument(t *testing.T) {
	doc, ops, graph := loadAll(t)
	for _, p := range compare(t, doc, ops, graph) {
		t.Error(p)
	}
}

// TestCompareCatches plants each kind of mismatch and wants it reported:
// a route the document lacks, an operation no router has, a missing and
// an extra status, a missing and an extra code, a wrong method, a wrong
// common error list.
func TestCompareCatches(t *testing.T) {
	doc, ops, graph := loadAll(t)
	planted := map[string]apicheck.Operation{}
	for id, o := range ops {
		o.Codes = maps.Clone(o.Codes)
		planted[id] = o
	}
	delete(planted, "join") // routed, undocumented
	planted["ghost"] = apicheck.Operation{ID: "ghost", Method: "GET", Path: "/v1/ghost", Servers: []string{"gateway"}, Codes: map[int][]string{200: nil}}
	sync := planted["sync"]
	sync.Codes[401] = []string{"token_expired", "unauthorized"} // a code the route never answers
	delete(sync.Codes, 400)                                     // a status it does answer
	planted["sync"] = sync
	leave := planted["leave"]
	leave.Codes[409] = []string{"unknown_member"} // codes missing
	leave.Codes[416] = []string{"offset_out_of_range"}
	planted["leave"] = leave
	jwks := planted["jwks"]
	jwks.Method = "POST"
	planted["jwks"] = jwks
	doc.Extensions["x-capgate-common-errors"] = map[string]any{"coordinator": []any{"not_found"}, "gateway": []any{}}
	got := strings.Join(compare(t, doc, planted, graph), "\n")
	for _, want := range []string{
		"coordinator routes POST /v1/groups/{p0}/join (join), the document does not have it",
		"the document has GET /v1/ghost (ghost) on the gateway, which does not route it",
		"sync 401: documented codes [token_expired unauthorized], the code answers [unauthorized]",
		"sync: documented statuses",
		"leave 409: documented codes [unknown_member]",
		"jwks: routed as GET",
		"coordinator: x-capgate-common-errors [not_found]",
		"gateway: x-capgate-common-errors []",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("planted mismatch not reported: %q\nreported:\n%s", want, got)
		}
	}
}

func loadAll(t *testing.T) (*openapi3.T, map[string]apicheck.Operation, *apicheck.Graph) {
	t.Helper()
	doc, ops := loadDocument(t)
	graphOnce.Do(func() {
		graph, graphErr = apicheck.Analyze(module+"/coordinator/...", module+"/gateway/...", module+"/api", module+"/ocap",
			module+"/tlsconf", module+"/broker", module+"/internal/connguard")
	})
	if graphErr != nil {
		t.Fatal(graphErr)
	}
	return doc, ops, graph
}

func loadDocument(t *testing.T) (*openapi3.T, map[string]apicheck.Operation) {
	t.Helper()
	doc, err := apicheck.Load()
	if err != nil {
		t.Fatal(err)
	}
	ops, err := apicheck.Operations(doc)
	if err != nil {
		t.Fatal(err)
	}
	return doc, ops
}

var (
	graphOnce sync.Once
	graph     *apicheck.Graph
	graphErr  error
)

const module = "github.com/capgate/capgate"

// compare lists every disagreement between the document and the routers.
func compare(t *testing.T, doc *openapi3.T, ops map[string]apicheck.Operation, graph *apicheck.Graph) []string {
	var problems []string
	report := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }
	union := map[string]apicheck.Answers{}
	for _, s := range servers() {
		answers, err := s.check(graph, ops, report)
		if err != nil {
			t.Fatal(err)
		}
		for id, a := range answers {
			union[id] = merge(union[id], a)
		}
		common, err := apicheck.CommonErrors(doc, s.name)
		if err != nil {
			t.Fatal(err)
		}
		if got := graph.Reach(s.common, status); !slices.Equal(common, got.Codes) {
			report("%s: x-capgate-common-errors %v, the router and server error handler answer %v", s.name, common, got.Codes)
		}
	}
	ids := slices.Sorted(maps.Keys(union))
	for _, id := range ids {
		want := merge(union[id], apicheck.Answers{Codes: apicheck.EveryOperationCodes, Statuses: everyOperationStatuses()})
		o, ok := ops[id]
		if !ok {
			continue // reported by check
		}
		if got := o.Statuses(); !slices.Equal(got, want.Statuses) {
			report("%s: documented statuses %v, the code answers %v", id, got, want.Statuses)
		}
		for _, st := range want.Statuses {
			if st < 400 {
				continue
			}
			var codes []string
			for _, c := range want.Codes {
				if status(c) == st {
					codes = append(codes, c)
				}
			}
			if !slices.Equal(o.Codes[st], codes) {
				report("%s %d: documented codes %v, the code answers %v", id, st, o.Codes[st], codes)
			}
		}
	}
	return problems
}

// check compares one server's route table with the document and returns
// what each of its routes can answer.
func (s *server) check(graph *apicheck.Graph, ops map[string]apicheck.Operation, report func(string, ...any)) (map[string]apicheck.Answers, error) {
	var names []string
	routed := map[string]bool{}
	for _, r := range s.routes {
		names = append(names, r.Name)
		routed[r.Name] = true
		o, ok := ops[r.Name]
		switch {
		case !ok:
			report("%s routes %s %s (%s), the document does not have it", s.name, r.Method, r.Path, r.Name)
		case !slices.Contains(o.Servers, s.name):
			report("%s routes %s, the document says only %v serve it", s.name, r.Name, o.Servers)
		case !strings.EqualFold(o.Method, r.Method) || !apicheck.SamePath(o.Path, r.Path):
			report("%s: routed as %s %s, documented as %s %s", r.Name, r.Method, r.Path, o.Method, o.Path)
		}
	}
	for _, id := range slices.Sorted(maps.Keys(ops)) {
		if o := ops[id]; slices.Contains(o.Servers, s.name) && !routed[id] {
			report("the document has %s %s (%s) on the %s, which does not route it", o.Method, o.Path, id, s.name)
		}
	}
	entries, err := graph.RouteEntries(s.router, names)
	if err != nil {
		return nil, err
	}
	answers := map[string]apicheck.Answers{}
	for _, r := range s.routes {
		if len(entries[r.Name]) == 0 {
			report("%s: route %s has no handler function the analysis can follow", s.name, r.Name)
		}
		answers[r.Name] = graph.Reach(entries[r.Name], status)
		if len(s.standby) > 0 && (leader.View{}).Route(r.Path) == leader.RouteNotLeader {
			answers[r.Name] = merge(answers[r.Name], graph.Reach(s.standby, status))
		}
	}
	return answers, nil
}

// everyOperationStatuses are the statuses of apicheck.EveryOperationCodes.
func everyOperationStatuses() []int {
	var out []int
	for _, c := range apicheck.EveryOperationCodes {
		out = append(out, status(c))
	}
	return out
}

func merge(a, b apicheck.Answers) apicheck.Answers {
	codes := map[string]bool{}
	statuses := map[int]bool{}
	for _, x := range []apicheck.Answers{a, b} {
		for _, c := range x.Codes {
			codes[c] = true
		}
		for _, s := range x.Statuses {
			statuses[s] = true
		}
	}
	return apicheck.Answers{Codes: slices.Sorted(maps.Keys(codes)), Statuses: slices.Sorted(maps.Keys(statuses))}
}

// TestProtocolDocumentCodes keeps docs/protocol.md's error table equal to
// the reject table: every code once, with its status and retriable flag.
func TestProtocolDocumentCodes(t *testing.T) {
	b, err := os.ReadFile("../../docs/protocol.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `([a-z_]+)` \\| (\\d{3}) \\| (yes|no) \\|")
	seen := map[string]bool{}
	for _, m := range row.FindAllStringSubmatch(string(b), -1) {
		code, st, retriable := api.Code(m[1]), m[2], m[3] == "yes"
		seen[m[1]] = true
		if want := api.Lookup(code); fmt.Sprint(want.Status) != st || want.Retriable != retriable || !slices.Contains(api.Codes(), m[1]) {
			t.Errorf("docs/protocol.md: %s %s retriable=%v; the table says %d retriable=%v", code, st, retriable, want.Status, want.Retriable)
		}
	}
	for _, c := range api.Codes() {
		if !seen[c] {
			t.Errorf("docs/protocol.md does not list %s", c)
		}
	}
}
