package coordinator

// Free text of the admin API: what an admin types (a QoS override's
// monitor tag, id and selector, the reason of a revoke or a deny, an
// offset reset's metadata) is kept and shown again — by `capgate admin`
// tables, the audit log, the console, the gateways' /metrics label values
// (monitor tags). It may hold any printable character, in any script, but
// no control character: C0 (U+0000–U+001F: NUL, ESC, tab, newline…), DEL
// (U+007F) or C1 (U+0080–U+009F, among them the 8-bit CSI). In a terminal
// ESC and CSI start escape sequences (clear the screen, recolour, retitle
// the window of whoever lists them), NUL cuts C strings, a newline forges
// a line of a log or of a table. A request carrying one is refused, 400
// bad_request naming the field (details field), before anything changes.
// The audit log records refused requests too, with the reason as sent: it
// is a record, JSON carries any character safely, and the clients that
// print it (capgate admin, the console's html/template) escape on output.

import (
	"fmt"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
)

// isControl: C0, DEL or C1.
func isControl(r rune) bool { return r < 0x20 || r >= 0x7f && r <= 0x9f }

// firstControl is the first control character of s and its byte offset.
func firstControl(s string) (rune, int, bool) {
	for i, r := range s {
		if isControl(r) {
			return r, i, true
		}
	}
	return 0, 0, false
}

// textRefusal is the message refusing field's value s, or "" when s holds
// no control character.
func textRefusal(field, s string) string {
	r, at, ok := firstControl(s)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%s: control character %U at byte %d refused (printable characters only)", field, r, at)
}

// checkTexts answers 400 naming the first of fields (name, value pairs)
// holding a control character; true when none does.
func checkTexts(ctx *fasthttp.RequestCtx, fields ...[2]string) bool {
	for _, f := range fields {
		if msg := textRefusal(f[0], f[1]); msg != "" {
			writeErrorDetails(ctx, api.CodeBadRequest, msg, map[string]any{"field": f[0]})
			return false
		}
	}
	return true
}
