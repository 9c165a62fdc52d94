package api

import (
	"bytes"
	"fmt"
)

// ContentCodingProblem is why a request body with these Content-Encoding
// header lines (each as sent, possibly a comma list) is refused with 415
// unsupported_media_type, or "" when every coding named is identity (or
// none is). Neither process decodes content codings: a gzip body read as
// plain JSON is a confusing 400 at best, and a body a proxy in front
// read one way must not be read another way here. The answer should
// carry "Accept-Encoding: identity" (RFC 9110 §15.5.16).
func ContentCodingProblem(lines [][]byte) string {
	for _, line := range lines {
		for coding := range bytes.SplitSeq(line, []byte(",")) {
			coding = bytes.Trim(coding, " \t")
			if len(coding) > 0 && !bytes.EqualFold(coding, []byte("identity")) {
				return fmt.Sprintf("Content-Encoding %.64q is not accepted: send the body unencoded (no Content-Encoding, or identity)", coding)
			}
		}
	}
	return ""
}
