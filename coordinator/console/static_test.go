package console

import (
	"testing"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// Every answer of a static file is the one copy the process holds: the
// files are public, and a copy per answer let connections that asked and
// never read hold ~32 KB each (console.js) until write_timeout.
func TestStaticFilesAreOneCopy(t *testing.T) {
	for name := range static {
		var first *byte
		for i := range 3 {
			var ctx fasthttp.RequestCtx
			serveStatic(&ctx, nil, []string{name})
			body := ctx.Response.Body()
			if ctx.Response.StatusCode() != fasthttp.StatusOK || len(body) == 0 {
				t.Fatalf("%s: %d, %d bytes", name, ctx.Response.StatusCode(), len(body))
			}
			if i == 0 {
				first = unsafe.SliceData(body)
			} else if unsafe.SliceData(body) != first {
				t.Fatalf("%s: answer %d is a copy of its own", name, i+1)
			}
		}
	}
	var ctx fasthttp.RequestCtx
	serveStatic(&ctx, nil, []string{"nope.js"})
	if ctx.Response.StatusCode() != fasthttp.StatusNotFound {
		t.Fatalf("an unknown file: %d", ctx.Response.StatusCode())
	}
}
