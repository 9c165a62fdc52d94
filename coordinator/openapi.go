package coordinator

// Behavior: GET /openapi.json — public: the API contract (api/openapi.yaml
// as JSON), the same document the gateways serve.

import (
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// RouteTable is the route table of a coordinator configured with cfg,
// paths as OpenAPI templates ({p0}, {p1}, … for the parameters), for the
// test that holds api/openapi.yaml to the router, and for tooling.
func RouteTable(cfg Config) []api.Route {
	r := (&Coordinator{cfg: cfg}).newRouter()
	out := make([]api.Route, len(r.routes))
	for i, rt := range r.routes {
		path, n := "", 0
		for _, seg := range rt.pattern {
			if seg == "{}" {
				seg = "{p" + strconv.Itoa(n) + "}"
				n++
			}
			path += "/" + seg
		}
		out[i] = api.Route{Name: rt.name, Method: rt.method, Path: path}
	}
	return out
}

func (c *Coordinator) handleOpenAPI(ctx *fasthttp.RequestCtx, _ []string) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(api.MediaJSON)
	ctx.Response.SetBodyRaw(api.OpenAPIJSON()) // one copy for every connection (api.OpenAPIJSON)
}
