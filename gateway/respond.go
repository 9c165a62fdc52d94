package gateway

import (
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// writeError answers with the reject table's status for code and the JSON
// error body. 401s carry WWW-Authenticate; retriable refusals a
// Retry-After (seconds, at least 1) when retryAfter > 0.
func writeError(ctx *fasthttp.RequestCtx, code api.Code, message string, details map[string]any) {
	resp := &ctx.Response
	resp.ResetBody()
	resp.SetStatusCode(code.Status())
	resp.Header.SetContentType(api.MediaJSON)
	switch code {
	case api.CodeUnauthorized:
		if len(ctx.Request.Header.Peek(fasthttp.HeaderAuthorization)) == 0 {
			resp.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="capgate"`)
		} else {
			resp.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="capgate", error="invalid_token"`)
		}
	case api.CodeTokenExpired:
		resp.Header.Set(fasthttp.HeaderWWWAuthenticate, `Bearer realm="capgate", error="invalid_token", error_description="expired"`)
	}
	resp.SetBody(api.EncodeError(code, message, details))
}

// setRetryAfter sets Retry-After to d rounded up to whole seconds (≥ 1).
func setRetryAfter(ctx *fasthttp.RequestCtx, d time.Duration) {
	secs := max(int64((d+time.Second-1)/time.Second), 1)
	ctx.Response.Header.Set(fasthttp.HeaderRetryAfter, strconv.FormatInt(secs, 10))
}

// writeJSONBody answers 200 with a JSON body already encoded.
func writeJSONBody(ctx *fasthttp.RequestCtx, body []byte) {
	ctx.SetStatusCode(fasthttp.StatusOK)
	ctx.Response.Header.SetContentType(api.MediaJSON)
	ctx.SetBody(body)
}
