package gateway

// Behavior: GET /openapi.json — public: the API contract (api/openapi.yaml
// as JSON), the same document the coordinator serves.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// RouteTable is the gateway's route table (cfg decides the client
// certificate wrapping only), for the test that holds api/openapi.yaml to
// the router, and for tooling.
func RouteTable(cfg Config) []api.Route {
	table := (&Gateway{cfg: cfg}).newRoutes()
	out := make([]api.Route, len(table))
	for i, rt := range table {
		out[i] = api.Route{Name: rt.name, Method: rt.method, Path: rt.path}
	}
	return out
}

func serveOpenAPI(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType(api.MediaJSON)
	ctx.Response.SetBodyRaw(api.OpenAPIJSON()) // one copy for every connection (api.OpenAPIJSON)
}
