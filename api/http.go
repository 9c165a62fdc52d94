package api

import (
	"bytes"
	"fmt"
	"mime"
)

// FoldedHeaders reports whether a raw header block continues a header on
// the next line (obs-fold, RFC 9112 §5.2: a line starting with a space or
// a tab). Both processes refuse such requests with 400: fasthttp would
// join the lines, so a header an intermediary read as two could reach a
// handler as one (an Authorization value assembled across lines).
func FoldedHeaders(raw []byte) bool {
	return bytes.Contains(raw, []byte("\n ")) || bytes.Contains(raw, []byte("\n\t"))
}

// IsJSON reports whether a Content-Type names application/json (any
// parameters, such as charset, allowed).
func IsJSON(contentType []byte) bool {
	t, _, err := mime.ParseMediaType(string(contentType))
	return err == nil && t == MediaJSON
}

// NotJSONProblem is the 415 message for a JSON route's body sent with
// contentType (empty: none was sent), and the fix: curl -d sends
// application/x-www-form-urlencoded unless told otherwise, the first
// thing a user pasting a curl line trips on.
func NotJSONProblem(contentType []byte) string {
	const fix = "add -H 'Content-Type: application/json'"
	switch t, _, _ := mime.ParseMediaType(string(contentType)); {
	case len(contentType) == 0:
		return "request body must be Content-Type: application/json, and none was sent (" + fix + ")"
	case t == "application/x-www-form-urlencoded":
		return fmt.Sprintf("request body must be Content-Type: application/json, not %.64q (curl -d sends that: %s)", contentType, fix)
	default:
		return fmt.Sprintf("request body must be Content-Type: application/json, not %.64q (%s)", contentType, fix)
	}
}

// FramingHeaders counts the raw header lines (as sent, before any
// parser merged or dropped them) of the headers a request must not
// repeat or combine: Content-Length, Transfer-Encoding and Authorization;
// and the lines, the empty one ending the block included, that end in a
// bare LF rather than CRLF.
type FramingHeaders struct{ ContentLength, TransferEncoding, Authorization, BareLF int }

// CountFramingHeaders reads raw, a request's header lines.
func CountFramingHeaders(raw []byte) FramingHeaders {
	var n FramingHeaders
	for len(raw) > 0 {
		line, rest, ended := bytes.Cut(raw, []byte("\n"))
		raw = rest
		if ended && (len(line) == 0 || line[len(line)-1] != '\r') {
			n.BareLF++
		}
		if len(line) == 0 {
			continue
		}
		switch line[0] | 0x20 {
		case 'a', 'c', 't':
		default:
			continue
		}
		name, _, _ := bytes.Cut(line, []byte(":"))
		switch {
		case bytes.EqualFold(name, []byte("Content-Length")):
			n.ContentLength++
		case bytes.EqualFold(name, []byte("Transfer-Encoding")):
			n.TransferEncoding++
		case bytes.EqualFold(name, []byte("Authorization")):
			n.Authorization++
		}
	}
	return n
}

// Problem is why a request with these header lines is refused (400), or
// "": framed both ways, a request-smuggling shape (RFC 9112 §6.3;
// fasthttp keeps the chunked framing, drops Content-Length, and after
// reading the body even drops Transfer-Encoding, hence the raw lines),
// two Authorization headers (fasthttp reads the first; a proxy in front
// may have checked the other), or a line ending in a bare LF. The
// servers' connections refuse a bare LF before fasthttp reads the head
// (internal/crlf); this catches the heads that reader no longer follows
// (after a chunked body), whose bare-LF lines fasthttp accepts once a
// CRLFCRLF comes later in the stream.
func (n FramingHeaders) Problem() string {
	switch {
	case n.BareLF > 0:
		return "a header line ends in a bare LF: HTTP/1.1 lines end in CRLF (RFC 9112 §2.2)"
	case n.ContentLength > 0 && n.TransferEncoding > 0:
		return "Content-Length together with Transfer-Encoding"
	case n.Authorization > 1:
		return "Authorization given more than once"
	}
	return ""
}
