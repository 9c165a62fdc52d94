// Package apicheck holds the API contract to the code: it loads
// api/openapi.yaml with kin-openapi (OpenAPI 3.1), and finds, by reading
// the source with go/packages, which error codes and statuses each route
// of the coordinator and the gateway can answer. The router tests of
// both processes compare the two both ways, so a route, method, status or
// error code missing from the document, or documented but absent, fails.
//
// How codes are found (Analyze, Graph.Route): the entry functions of a
// route are the functions its route-table entry references; from them the
// call graph is walked across the loaded capgate packages (functions,
// methods and package variables, by qualified name; interface calls are
// not followed). A route answers an error code when a reachable function
// or variable names a constant of a code type (api.Code, and the token
// endpoint's OAuth2 errors). Events sent to the coordinator's state
// machine are followed too: a reachable composite literal of a
// coordinator/group type T adds whatever the `case T:` clause of
// (*Machine).apply reaches. Statuses are the codes' table statuses plus
// the 2xx fasthttp/net/http constants reachable (200 when none is).
//
// It is test support: only tests import it. Not safe for concurrent use
// of one Graph while it is built.
package apicheck
