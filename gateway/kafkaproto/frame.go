package kafkaproto

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// A Kafka request on the wire is a frame: a 4-byte big-endian size, then
// the request header (api key, api version, correlation id, client id, and
// tagged fields from header v2 on) and the request body. Parsing and
// building bodies is kmsg's; this file only splits frames and headers.
// parseRequest is pure and fuzzed (FuzzParseRequest).

// header is a parsed request header.
type header struct {
	key         int16
	version     int16
	correlation int32
	clientID    string
}

// Frame decoding failures. Every one of them closes the connection, as a
// Kafka broker does: after a frame it cannot parse, nothing that follows
// on the connection can be trusted.
var (
	errTruncated      = errors.New("kafkaproto: truncated request")
	errUnknownAPI     = errors.New("kafkaproto: unknown or unsupported api key")
	errBadVersion     = errors.New("kafkaproto: unsupported api version")
	errFrameSize      = errors.New("kafkaproto: frame size out of bounds")
	errBadRequestBody = errors.New("kafkaproto: malformed request body")
)

// frameSize reads a frame's size prefix and checks it against [least,
// most] (a request needs 10 bytes of header: key, version, correlation id,
// client id length).
func frameSize(prefix [4]byte, least, most int32) (int32, error) {
	n := int32(binary.BigEndian.Uint32(prefix[:]))
	if n < least || n > most {
		return 0, fmt.Errorf("%w: %d bytes (allowed [%d, %d])", errFrameSize, n, least, most)
	}
	return n, nil
}

// parseRequest splits a frame body into its header and kmsg request.
// Only keys and versions in the api table are parsed, and a request
// naming more than maxEntries partitions or topics is refused before
// kmsg decodes it (errTooManyEntries, entries.go). An ApiVersions
// request of a version above what we implement returns its header with
// errBadVersion, so the caller can answer UNSUPPORTED_VERSION as Kafka
// does (KIP-511); any other error means close.
func parseRequest(body []byte, maxEntries int) (header, kmsg.Request, error) {
	r := kbin.Reader{Src: body}
	h := header{key: r.Int16(), version: r.Int16(), correlation: r.Int32()}
	if cid := r.NullableString(); cid != nil {
		h.clientID = *cid
	}
	if !r.Ok() {
		return h, nil, errTruncated
	}
	api, ok := lookupAPI(h.key)
	if !ok {
		return h, nil, fmt.Errorf("%w: key %d", errUnknownAPI, h.key)
	}
	if h.version < api.min || h.version > api.max {
		return h, nil, fmt.Errorf("%w: key %d version %d, implemented [%d, %d]", errBadVersion, h.key, h.version, api.min, api.max)
	}
	req := kmsg.RequestForKey(h.key)
	req.SetVersion(h.version)
	if req.IsFlexible() {
		kmsg.SkipTags(&r)
		if !r.Ok() {
			return h, nil, errTruncated
		}
	}
	if api.bodyMax > 0 && len(r.Src) > api.bodyMax {
		return h, nil, fmt.Errorf("%w: %s v%d of %d bytes, over the %d a refused admin request may have", errTooManyEntries, kmsg.NameForKey(h.key), h.version, len(r.Src), api.bodyMax)
	}
	if err := overEntries(h.key, h.version, r.Src, maxEntries); err != nil {
		return h, nil, err
	}
	if err := req.ReadFrom(r.Src); err != nil {
		return h, nil, fmt.Errorf("%w: key %d version %d: %v", errBadRequestBody, h.key, h.version, err)
	}
	return h, req, nil
}

// appendResponse appends one response frame: size, correlation id, the
// response header's tagged fields (header v1, flexible versions except
// ApiVersions, which always answers with header v0), then the body.
func appendResponse(dst []byte, correlation int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = binary.BigEndian.AppendUint32(dst, uint32(correlation))
	if resp.IsFlexible() && resp.Key() != int16(kmsg.ApiVersions) {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst
}
