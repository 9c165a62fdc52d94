package main

// What the CLI prints for people is text from elsewhere: a record's
// value, another admin's revoke reason, a holder name, a server's error
// message, a token's claims. A terminal obeys the control characters in
// it — ESC starts a sequence that clears the screen, recolours text or
// retitles the window; C1 codes (U+0080–U+009F) do the same on some
// terminals; bidi overrides and other format characters make text read
// differently than it is. So everything printed in a human format passes
// through one rule, unsafeRune: any rune that is not printable (Go's
// unicode.IsPrint) other than the ASCII space, and any byte that is not
// UTF-8, is shown escaped, never sent as it is.
//
//   - quoteUnsafe (table cells, consume's text records): the text as it is
//     when it holds none, else the whole text quoted Go style, so an
//     escape in a cell reads as one.
//   - escapeUnsafe (error messages): just those runes as Go escapes.
//   - jsonTerminalSafe (--output json): JSON already escapes C0; DEL, C1
//     and format characters become \uXXXX, which stays the same JSON.
//   - safeConsoleEncoding (console logs): messages escaped, string fields
//     escaped beyond what their JSON escapes.

import (
	"bytes"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"

	"go.uber.org/zap"
	"go.uber.org/zap/buffer"
	"go.uber.org/zap/zapcore"
)

// unsafeRune reports whether r must not reach a terminal as it is.
func unsafeRune(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }

// safeText reports whether s is UTF-8 holding no unsafe rune.
func safeText(s string) bool { return utf8.ValidString(s) && !strings.ContainsFunc(s, unsafeRune) }

// quoteUnsafe is s, or s quoted Go style when it is not safe text.
func quoteUnsafe(s string) string {
	if safeText(s) {
		return s
	}
	return strconv.Quote(s)
}

// escapeUnsafe writes each unsafe rune (or non-UTF-8 byte) of s as its Go
// escape (\x1b, \n, \u202e); keep names runes left as they are (a
// message's own line breaks).
func escapeUnsafe(s string, keep ...rune) string {
	return escapeWhere(s, func(r rune) bool { return unsafeRune(r) && !slices.Contains(keep, r) })
}

// escapeWhere writes each rune of s that escape says, and each byte that
// is not UTF-8, as its Go escape.
func escapeWhere(s string, escape func(rune) bool) string {
	if utf8.ValidString(s) && !strings.ContainsFunc(s, escape) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case escape(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+size])
		}
		i += size
	}
	return b.String()
}

// jsonTerminalSafe rewrites encoding/json's output so that no unsafe rune
// is left in it: such runes can only be inside strings (the rest is
// ASCII), where \uXXXX (a surrogate pair above the BMP) means the same.
// The output's own line breaks and indentation are kept.
func jsonTerminalSafe(b []byte) []byte {
	if utf8.Valid(b) && !bytes.ContainsFunc(b, func(r rune) bool { return unsafeRune(r) && r != '\n' }) {
		return b
	}
	out := make([]byte, 0, len(b)+16)
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			out = append(out, `\ufffd`...) // encoding/json writes none; never pass one on
		case r != '\n' && unsafeRune(r):
			if r > 0xffff {
				r1, r2 := utf16.EncodeRune(r)
				out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
			} else {
				out = fmt.Appendf(out, `\u%04x`, r)
			}
		default:
			out = append(out, b[i:i+size]...)
		}
		i += size
	}
	return out
}

// safeConsoleEncoding is zap's console encoding with no unsafe rune in
// what it prints (newLogger uses it for log.format console, the logs
// people read on a terminal: consume's, produce's, dev's). zap writes a
// console line's message as it is and its fields as JSON, which escapes
// C0 only: the message is escaped whole, string fields (errors and
// Stringers included, which carry servers' messages) beyond what JSON
// escapes.
const safeConsoleEncoding = "capgate-console"

func init() {
	if err := zap.RegisterEncoder(safeConsoleEncoding, func(c zapcore.EncoderConfig) (zapcore.Encoder, error) {
		return safeEncoder{zapcore.NewConsoleEncoder(c)}, nil
	}); err != nil {
		panic(err)
	}
}

type safeEncoder struct{ zapcore.Encoder }

func (e safeEncoder) Clone() zapcore.Encoder { return safeEncoder{e.Encoder.Clone()} }

// AddString takes the fields of Logger.With (zap adds errors and
// Stringers as strings too).
func (e safeEncoder) AddString(key, value string) { e.Encoder.AddString(key, escapeBeyondJSON(value)) }

func (e safeEncoder) EncodeEntry(ent zapcore.Entry, fields []zapcore.Field) (*buffer.Buffer, error) {
	ent.Message = escapeUnsafe(ent.Message)
	safe := make([]zapcore.Field, len(fields))
	for i, f := range fields {
		safe[i] = safeField(f)
	}
	return e.Encoder.EncodeEntry(ent, safe)
}

func safeField(f zapcore.Field) zapcore.Field {
	switch f.Type {
	case zapcore.StringType:
		f.String = escapeBeyondJSON(f.String)
	case zapcore.ErrorType:
		if err, ok := f.Interface.(error); ok && err != nil {
			return zap.String(f.Key, escapeBeyondJSON(err.Error()))
		}
	case zapcore.StringerType:
		if s, ok := f.Interface.(fmt.Stringer); ok && s != nil {
			return zap.String(f.Key, escapeBeyondJSON(s.String()))
		}
	}
	return f
}

// escapeBeyondJSON escapes the unsafe runes JSON leaves as they are
// (DEL, C1, format characters); JSON escapes the rest.
func escapeBeyondJSON(s string) string {
	return escapeWhere(s, func(r rune) bool { return r >= 0x7f && unsafeRune(r) })
}
