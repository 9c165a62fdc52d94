package coordinator

// Behavior: GET /openapi.json — public: the API contract (api/openapi.yaml
// as JSON), the same document the gateways serve.

import (
	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

func (c *Coordinator) handleOpenAPI(ctx *fasthttp.RequestCtx, _ []string) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.SetContentType(api.MediaJSON)
	ctx.SetBody(api.OpenAPIJSON())
}
