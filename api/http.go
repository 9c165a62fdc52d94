package api

import (
	"bytes"
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
