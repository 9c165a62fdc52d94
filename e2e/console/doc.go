// Package console tests the operator's console in a real headless
// Chromium, driven over the DevTools protocol with chromedp, against a real
// coordinator, gateway, kfake broker and SDK consumers (e2e/sdk).
//
// Chromium is required: Debian's `chromium` package (.ci/run installs it).
// The tests fail, rather than skip, without it. They take screenshots of
// the main views into a temporary directory and check them; with
// -console.screenshots they also write them to docs/ for the README:
//
//	go test ./e2e/console/ -run 'TestConsoleInBrowser|TestConsoleIdPLogin|TestConsoleActionsInBrowser' -console.screenshots
package console
