package main

import (
	"bufio"
	"fmt"
	"strconv"
	"strings"

	"github.com/capgate/capgate/client"
)

// kcatFormat is a kcat -f format string, compiled: consume --format takes
// one as kcat does (a kcat user's `-f '%t/%p@%o %s\n'` was refused "want
// text or json"; newuser4 #9). Pieces are literal text or one of kcat's
// fields: %t topic, %p partition, %o offset, %k key, %s value, %K and %S
// their lengths (-1 when absent), %T the timestamp in ms, %h the headers
// (k=v, comma-separated), %% a percent; \n, \r, \t and \\ are escapes.
// Keys, values and headers are written as they are, as kcat writes them.
type kcatFormat []kcatPiece

type kcatPiece struct {
	field byte   // 0: literal text
	text  string // the literal
}

// isKcatFormat: a --format value that is no name but a format string.
func isKcatFormat(s string) bool { return strings.ContainsAny(s, `%\`) }

// parseKcatFormat compiles s; an unknown %x or a trailing % or \ is a
// usage error naming it.
func parseKcatFormat(s string) (kcatFormat, error) {
	var out kcatFormat
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			out = append(out, kcatPiece{text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '%' && c != '\\' {
			lit.WriteByte(c)
			continue
		}
		if i+1 == len(s) {
			return nil, usageErrorf("--format %q: a %c at its end: write %c%c for one", s, c, c, c)
		}
		i++
		switch n := s[i]; {
		case c == '\\':
			esc, ok := map[byte]byte{'n': '\n', 'r': '\r', 't': '\t', '\\': '\\'}[n]
			if !ok {
				return nil, usageErrorf("--format %q: \\%c: the escapes are \\n, \\r, \\t and \\\\", s, n)
			}
			lit.WriteByte(esc)
		case n == '%':
			lit.WriteByte('%')
		case strings.IndexByte("tpoksKSTh", n) >= 0:
			flush()
			out = append(out, kcatPiece{field: n})
		default:
			return nil, usageErrorf("--format %q: %%%c: kcat's fields here are %%t topic, %%p partition, %%o offset, %%k key, %%s value, %%K and %%S their lengths, %%T timestamp (ms), %%h headers, %%%% a percent", s, n)
		}
	}
	flush()
	return out, nil
}

// write writes r as the format says.
func (f kcatFormat) write(w *bufio.Writer, r *client.Record) error {
	for _, p := range f {
		switch p.field {
		case 0:
			w.WriteString(p.text)
		case 't':
			w.WriteString(r.Topic)
		case 'p':
			w.WriteString(strconv.FormatInt(int64(r.Partition), 10))
		case 'o':
			w.WriteString(strconv.FormatInt(r.Offset, 10))
		case 'k':
			w.Write(r.Key)
		case 's':
			w.Write(r.Value)
		case 'K':
			w.WriteString(strconv.Itoa(lengthOrNone(r.Key)))
		case 'S':
			w.WriteString(strconv.Itoa(lengthOrNone(r.Value)))
		case 'T':
			w.WriteString(strconv.FormatInt(r.Timestamp.UnixMilli(), 10))
		case 'h':
			for i, h := range r.Headers {
				if i > 0 {
					w.WriteByte(',')
				}
				fmt.Fprintf(w, "%s=%s", h.Key, h.Value)
			}
		}
	}
	return nil
}

// lengthOrNone is len(b), or -1 for no key or value (kcat's %K, %S).
func lengthOrNone(b []byte) int {
	if b == nil {
		return -1
	}
	return len(b)
}
