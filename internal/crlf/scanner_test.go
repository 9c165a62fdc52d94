package crlf

import (
	"errors"
	"strconv"
	"strings"
	"testing"
)

// follow feeds stream to a fresh scanner in pieces of size (the last one
// shorter) and returns how many bytes passed before a refusal, and it.
func follow(stream string, size int) (int, error) {
	var s scanner
	passed := 0
	for i := 0; i < len(stream); i += size {
		piece := stream[i:min(i+size, len(stream))]
		if s.phase == phaseOff {
			passed += len(piece)
			continue
		}
		passed += s.scan([]byte(piece))
		if s.refusal != nil {
			return passed, s.refusal
		}
	}
	return passed, nil
}

// TestScannerFollowsHeadsAndBodies: what the scanner passes and refuses
// on streams of one or more requests, the same however the stream is cut
// into reads (every piece size from 1 byte to the whole stream).
func TestScannerFollowsHeadsAndBodies(t *testing.T) {
	get := "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
	post := func(body string) string {
		return "POST /p HTTP/1.1\r\nHost: x\r\ncontent-length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	}
	bareGet := "GET /healthz HTTP/1.1\nHost: x\n\n"
	for _, c := range []struct {
		name   string
		stream string
		passed int // bytes passed before the refusal (the whole stream when none)
		want   error
	}{
		{"one CRLF head", get, -1, nil},
		{"pipelined CRLF heads", get + get + get, -1, nil},
		{"empty lines before the request line are skipped", "\r\n\n" + get, -1, nil},
		{"a body holding bare LFs and blank lines is skipped", post("a\n\nb\n\n\nGET / HTTP/1.1\n\n") + get, -1, nil},
		{"Content-Length with spaces", "POST /p HTTP/1.1\r\nContent-Length:  \t3 \r\n\r\nx\n\n" + get, -1, nil},
		{"Content-Length 0", "POST /p HTTP/1.1\r\nContent-Length: 0\r\n\r\n" + bareGet, len("POST /p HTTP/1.1\r\nContent-Length: 0\r\n\r\nGET /healthz HTTP/1.1\n"), ErrBareLF},
		{"bare LF everywhere", bareGet, len("GET /healthz HTTP/1.1\n"), ErrBareLF},
		{"bare LF after the request line only", "GET / HTTP/1.1\nHost: x\r\n\r\n", len("GET / HTTP/1.1\n"), ErrBareLF},
		{"bare LF on a header line", "GET / HTTP/1.1\r\nHost: x\nA: b\r\n\r\n", len("GET / HTTP/1.1\r\nHost: x\n"), ErrBareLF},
		{"bare LF ending the head", "GET / HTTP/1.1\r\nHost: x\r\n\n" + get, len("GET / HTTP/1.1\r\nHost: x\r\n\n"), ErrBareLF},
		{"bare LF in the head after a body", post("a\nb") + bareGet, len(post("a\nb")) + len("GET /healthz HTTP/1.1\n"), ErrBareLF},
		{"CR LF split by a CR", "GET / HTTP/1.1\r\nA: b\r\r\n\r\n", -1, nil}, // "b\r" is a value fasthttp refuses; the line ends in CRLF
		{"TLS handshake", "\x16\x03\x01\x00\xa5\x01", 1, ErrNotHTTP},
		{"space before the method", " GET / HTTP/1.1\r\n\r\n", 1, ErrNotHTTP},
		{"not HTTP after a request", get + "\x01\x00", len(get) + 1, ErrNotHTTP},
		{"a Kafka request (ApiVersions)", "\x00\x00\x00\x1f\x00\x12\x00\x03", 1, ErrKafkaRequest},
		{"a Kafka request after a request", get + "\x00\x01", len(get) + 1, ErrKafkaRequest},
		// Framings the scanner does not follow: everything passes.
		{"chunked body", "POST /p HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\na\n\n\r\n0\r\n\r\n" + bareGet, -1, nil},
		{"Content-Length with Transfer-Encoding", "POST /p HTTP/1.1\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n" + bareGet, -1, nil},
		{"two Content-Lengths", "POST /p HTTP/1.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\n" + bareGet, -1, nil},
		{"Content-Length not a number", "POST /p HTTP/1.1\r\nContent-Length: 3x\r\n\r\n" + bareGet, -1, nil},
		{"Content-Length of 19 digits", "POST /p HTTP/1.1\r\nContent-Length: 1000000000000000000\r\n\r\n" + bareGet, -1, nil},
		{"Content-Length past what a line keeps", "POST /p HTTP/1.1\r\nContent-Length:" + strings.Repeat(" ", lineKept) + "3\r\n\r\n" + bareGet, -1, nil},
		{"folded line", "POST /p HTTP/1.1\r\nContent-Length: 3\r\n 4\r\n\r\n" + bareGet, -1, nil},
	} {
		want := c.passed
		if want < 0 {
			want = len(c.stream)
		}
		for size := 1; size <= len(c.stream); size++ {
			passed, err := follow(c.stream, size)
			if passed != want || !errors.Is(err, c.want) || (err == nil) != (c.want == nil) {
				t.Errorf("%s, read %d bytes at a time: passed %d bytes, refusal %v; want %d, %v", c.name, size, passed, err, want, c.want)
				break
			}
		}
	}
}

// BenchmarkScanFetchHead: what following one fetch's head costs (a
// capability of ~600 bytes, the SDK's headers).
func BenchmarkScanFetchHead(b *testing.B) {
	head := []byte("GET /v1/topics/orders/partitions/3/records?offset=12345&max_bytes=1048576&max_wait_ms=500 HTTP/1.1\r\n" +
		"Host: 127.0.0.1:8080\r\nUser-Agent: Go-http-client/1.1\r\nAccept: application/vnd.kafka.record-batch\r\n" +
		"Authorization: Bearer " + strings.Repeat("x", 600) + "\r\nAccept-Encoding: gzip\r\n\r\n")
	var s scanner
	b.SetBytes(int64(len(head)))
	for b.Loop() {
		if s.scan(head) != len(head) || s.refusal != nil {
			b.Fatal("refused")
		}
	}
}
