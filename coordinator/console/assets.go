package console

import (
	"embed"
	"html/template"
	"io/fs"
	"net/url"
	"path"

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

func serveStatic(ctx *fasthttp.RequestCtx, _ *session, params []string) {
	name := params[0]
	kind, ok := static[name]
	if !ok {
		writeProblem(ctx, fasthttp.StatusNotFound, "not_found", "no such file")
		return
	}
	b, err := assets.ReadFile(path.Join("assets/static", name))
	if err != nil {
		writeProblem(ctx, fasthttp.StatusNotFound, "not_found", "no such file")
		return
	}
	ctx.Response.Header.Set("Cache-Control", "no-cache")
	ctx.SetContentType(kind)
	ctx.SetBody(b)
}

// pageNames are the templates rendered as whole pages (with layout.html)
// or, for live, alone.
var pageNames = []string{"login", "groups", "group", "live", "timeline", "gateways", "overrides", "audit", "problem"}

// parsePages parses layout.html and the partials once per page, so every
// page defines its own "content".
func parsePages() (map[string]*template.Template, error) {
	funcs := template.FuncMap{
		"pathEscape": url.PathEscape,
		"clock":      clockText,
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
