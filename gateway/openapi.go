package gateway

// Behavior: GET /openapi.json — public: the API contract (api/openapi.yaml
// as JSON), the same document the coordinator serves.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

func serveOpenAPI(ctx *fasthttp.RequestCtx) {
	ctx.SetContentType(api.MediaJSON)
	ctx.SetBody(api.OpenAPIJSON())
}
