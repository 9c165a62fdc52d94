package console

import (
	"embed"
	"html/template"
	"io/fs"
	"net/url"
	"path"
	"sync"

	"github.com/valyala/fasthttp"
)

// Everything the browser loads is in the binary: no CDN, works offline.
//
//go:embed assets/static assets/templates
var assets embed.FS

// static maps a file name under /console/static/ to its content type.
var static = map[string]string{
	"console.css": "text/css; charset=utf-8",
	"console.js":  "text/javascript; charset=utf-8",
	"favicon.svg": "image/svg+xml",
}

// staticFiles holds each static file once for the process, read at the
// first request. Answers hand fasthttp the slice uncopied (SetBodyRaw),
// so nothing may change it: the files are public (the login page needs
// them), and copied into each answer (~32 KB of console.js, after
// embed's own copy per read), connections of anyone that asked and never
// read made the coordinator hold that much each until write_timeout,
// as /openapi.json did (redteam15 #2's left).
var staticFiles = sync.OnceValue(func() map[string][]byte {
	files := make(map[string][]byte, len(static))
	for name := range static {
		if b, err := assets.ReadFile(path.Join("assets/static", name)); err == nil {
			files[name] = b[:len(b):len(b)] // an append copies
		}
	}
	return files
})

func serveStatic(ctx *fasthttp.RequestCtx, _ *session, params []string) {
	name := params[0]
	kind, ok := static[name]
	b, read := staticFiles()[name]
	if !ok || !read {
		writeProblem(ctx, fasthttp.StatusNotFound, "not_found", "no such file")
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetContentType(kind)
	ctx.Response.SetBodyRaw(b)
}

// pageNames are the templates rendered as whole pages (with layout.html)
// or, for live, alone.
var pageNames = []string{"login", "groups", "group", "live", "timeline", "gateways", "overrides", "audit", "problem", "standby"}

// parsePages parses layout.html and the partials once per page, so every
// page defines its own "content".
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"pathEscape": url.PathEscape,
		"clock":      clockText,
		"nameHead":   nameHead,
		"nameTail":   nameTail,
		"add":        func(a, b int) int { return a + b },
	}
	base, err := template.New("base").Funcs(funcs).ParseFS(assets, "assets/templates/layout.html", "assets/templates/partials.html")
	if err != nil {
		return nil, err
	}
	pages := make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := base.Clone()
		if err != nil {
			return nil, err
		}
		if _, err := t.ParseFS(assets, "assets/templates/"+name+".html"); err != nil {
			return nil, err
		}
		if t.Lookup(name) == nil {
			return nil, fs.ErrNotExist
		}
		pages[name] = t
	}
	return pages, nil
}

func queryEscape(s string) string { return url.QueryEscape(s) }

// nameTailBytes is how much of the end of a holder's name a grid cell
// always shows. Member ids are "<client id>-<16 hex digits>": a fleet of
// one client id shares all but the end, and a cell that cut the name at
// its right edge showed the same "capgate-consume-a5…" in every colour.
// Names are printable ASCII (ocap.ValidName), so bytes are characters.
const nameTailBytes = 8

// nameHead is what of name may be cut (with an ellipsis) to fit a cell;
// nameTail the end, always shown.
func nameHead(name string) string {
	if len(name) <= 2*nameTailBytes {
		return name
	}
	return name[:len(name)-nameTailBytes]
}

func nameTail(name string) string {
	if len(name) <= 2*nameTailBytes {
		return ""
	}
	return name[len(name)-nameTailBytes:]
}
