package gateway

import (
	"encoding/base64"
	"strconv"
	"unicode/utf8"

	"github.com/twmb/franz-go/pkg/kgo"
)

// appendFetchJSON appends the api.FetchResponse JSON of recs to buf,
// byte for byte what encoding/json would produce (keys and values as
// standard base64, nil as null, headers omitted when there are none,
// strings HTML-escaped and invalid UTF-8 replaced), without reflection or
// intermediate allocations.
func appendFetchJSON(buf []byte, recs []*kgo.Record, next, highWatermark int64) []byte {
	buf = growFor(buf, recs)
	buf = append(buf, `{"records":[`...)
	for i, r := range recs {
		if i > 0 {
			buf = append(buf, ',')
		}
		buf = appendRecordJSON(buf, r)
	}
	buf = append(buf, `],"next_offset":`...)
	buf = strconv.AppendInt(buf, next, 10)
	buf = append(buf, `,"high_watermark":`...)
	buf = strconv.AppendInt(buf, highWatermark, 10)
	return append(buf, '}')
}

// growFor reserves room for the encoded records up front: base64 is 4/3 of
// the bytes, plus the fixed keys of each record.
func growFor(buf []byte, recs []*kgo.Record) []byte {
	n := jsonAnswerOverhead
	for _, r := range recs {
		n += jsonRecordSize(r)
	}
	if cap(buf)-len(buf) < n {
		grown := make([]byte, len(buf), len(buf)+n)
		copy(grown, buf)
		buf = grown
	}
	return buf
}

func appendRecordJSON(buf []byte, r *kgo.Record) []byte {
	buf = append(buf, `{"offset":`...)
	buf = strconv.AppendInt(buf, r.Offset, 10)
	buf = append(buf, `,"timestamp":`...)
	buf = strconv.AppendInt(buf, r.Timestamp.UnixMilli(), 10)
	buf = append(buf, `,"key":`...)
	buf = appendBase64JSON(buf, r.Key)
	buf = append(buf, `,"value":`...)
	buf = appendBase64JSON(buf, r.Value)
	if len(r.Headers) > 0 {
		buf = append(buf, `,"headers":[`...)
		for i, h := range r.Headers {
			if i > 0 {
				buf = append(buf, ',')
			}
			buf = append(buf, `{"key":`...)
			buf = appendStringJSON(buf, h.Key)
			buf = append(buf, `,"value":`...)
			buf = appendBase64JSON(buf, h.Value)
			buf = append(buf, '}')
		}
		buf = append(buf, ']')
	}
	return append(buf, '}')
}

// appendBase64JSON encodes b as encoding/json encodes a []byte.
func appendBase64JSON(buf, b []byte) []byte {
	if b == nil {
		return append(buf, "null"...)
	}
	buf = append(buf, '"')
	buf = base64.StdEncoding.AppendEncode(buf, b)
	return append(buf, '"')
}

const hexDigits = "0123456789abcdef"

// appendStringJSON quotes s as encoding/json does by default: control
// characters, quote, backslash, <, > and & escaped, invalid UTF-8 as
// U+FFFD, U+2028 and U+2029 escaped.
func appendStringJSON(buf []byte, s string) []byte {
	buf = append(buf, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' && c != '<' && c != '>' && c != '&' {
				i++
				continue
			}
			buf = append(buf, s[start:i]...)
			buf = appendEscapedByte(buf, c)
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 || r == '\u2028' || r == '\u2029' {
			buf = append(buf, s[start:i]...)
			if r == utf8.RuneError {
				buf = append(buf, `\ufffd`...)
			} else {
				buf = append(buf, `\u202`...)
				buf = append(buf, hexDigits[r&0xF])
			}
			start = i + size
		}
		i += size
	}
	buf = append(buf, s[start:]...)
	return append(buf, '"')
}

func appendEscapedByte(buf []byte, c byte) []byte {
	switch c {
	case '"', '\\':
		return append(buf, '\\', c)
	case '\b':
		return append(buf, '\\', 'b')
	case '\f':
		return append(buf, '\\', 'f')
	case '\n':
		return append(buf, '\\', 'n')
	case '\r':
		return append(buf, '\\', 'r')
	case '\t':
		return append(buf, '\\', 't')
	}
	return append(buf, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}
