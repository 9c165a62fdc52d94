package console

import (
	"bytes"
	"context"
	"flag"
	"image/png"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

var screenshotsToDocs = flag.Bool("console.screenshots", false, "also write the screenshots to docs/ (regenerates the README's images)")

// chromiumPath finds Debian's chromium (or CHROMIUM_PATH, for other
// layouts).
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("CHROMIUM_PATH"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("no chromium on PATH: install Debian's chromium (apt-get install chromium); .ci/run does")
	return ""
}

// browser is one headless Chromium with a fresh profile, closed at cleanup.
type browser struct {
	t        *testing.T
	ctx      context.Context
	shotsDir string
}

func newBrowser(t *testing.T) *browser {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("hide-scrollbars", true),
		chromedp.Flag("force-color-profile", "srgb"),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1440, 1000),
	}
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(allocCtx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first call starts the browser, which lives as long as the context
	// of that call: no timeout on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	// Every page records its script errors and Content-Security-Policy
	// violations; pageProblems reads them. (Injected over CDP, this runs
	// outside the page's CSP.)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: `
		window.__problems = [];
		addEventListener('error', e => window.__problems.push('error: ' + e.message));
		addEventListener('unhandledrejection', e => window.__problems.push('rejection: ' + e.reason));
		document.addEventListener('securitypolicyviolation', e => window.__problems.push('CSP: ' + e.violatedDirective + ' ' + e.blockedURI));`}); err != nil {
		t.Fatalf("install the problem recorder: %v", err)
	}
	return &browser{t: t, ctx: ctx, shotsDir: t.TempDir()}
}

// noProblems fails the test if the current page had a script error or a
// CSP violation.
func (b *browser) noProblems(where string) {
	b.t.Helper()
	if problems := eval[[]string](b, `window.__problems || ['no recorder on this page']`); len(problems) > 0 {
		b.t.Fatalf("%s: the page had problems: %q", where, problems)
	}
}

// run runs steps in order with a deadline.
func (b *browser) run(what string, timeout time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, timeout)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page (awaiting a promise
// it returns) and decodes its value.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor polls a JavaScript expression in the page until it is true or
// within has passed since from, and returns when it first held. The
// deadline is an upper bound: the poll never sleeps longer than 10 ms
// (waits after an action allow 15 s: a real Chromium on 2 busy cores).
func (b *browser) waitFor(what string, from time.Time, within time.Duration, expr string) time.Duration {
	b.t.Helper()
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("Boolean("+expr+")"))
		cancel()
		elapsed := time.Since(from)
		if err == nil && ok {
			return elapsed
		}
		if elapsed > within {
			page, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector('main')?.innerText.slice(0, 3000) ?? ''`))
			b.t.Fatalf("%s: not true within %s (err %v)\npage:\n%s", what, within, err, page)
		}
		time.Sleep(10 * time.Millisecond) // polling the DOM of a real browser
	}
}

// click clicks the element css selects in one step inside the page, once
// it exists. chromedp.Click resolves the node and then clicks it in two
// round trips; a page's periodic re-read (the groups page every 5 s)
// replacing the node in between failed it with "Could not find node with
// given id" (a CI run).
func (b *browser) click(what, css string) {
	b.t.Helper()
	b.waitFor(what, time.Now(), 10*time.Second,
		`(() => { const e = document.querySelector(`+js(css)+`); if (!e) return false; e.click(); return true })()`)
}

// screenshot captures the viewport as name.png into the temporary
// directory, checks it is a PNG with pixels, and with -console.screenshots
// also writes it to docs/console-<name>.png.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	b.noProblems("before screenshot " + name)
	ctx, cancel := context.WithTimeout(b.ctx, 20*time.Second)
	defer cancel()
	buf, err := chromedp.Run(ctx, chromedp.CaptureScreenshot())
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	img, err := png.Decode(bytes.NewReader(buf))
	if err != nil {
		b.t.Fatalf("screenshot %s: not a PNG: %v", name, err)
	}
	if size := img.Bounds().Size(); size.X < 800 || size.Y < 600 {
		b.t.Fatalf("screenshot %s: %v, want at least 800×600", name, size)
	}
	path := filepath.Join(b.shotsDir, name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		b.t.Fatal(err)
	}
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		b.t.Fatalf("screenshot %s not written: %v", path, err)
	}
	if *screenshotsToDocs {
		docs := filepath.Join("..", "..", "docs", "console-"+name+".png")
		if err := os.WriteFile(docs, buf, 0o644); err != nil {
			b.t.Fatalf("write %s: %v", docs, err)
		}
		b.t.Logf("wrote %s", docs)
	}
}
