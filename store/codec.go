package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// formatVersion is the first byte of every stored value. A reader that
// meets another version refuses the value (ErrCorrupt) until a migration
// for it is written.
const formatVersion byte = 1

// encoder builds a value: the format byte, then fields as varints and
// length-prefixed byte strings.
type encoder struct{ b []byte }

func newEncoder(sizeHint int) *encoder {
	e := &encoder{b: make([]byte, 1, 1+sizeHint)}
	e.b[0] = formatVersion
	return e
}

func (e *encoder) uint(v uint64) { e.b = binary.AppendUvarint(e.b, v) }
func (e *encoder) int(v int64)   { e.b = binary.AppendVarint(e.b, v) }

func (e *encoder) string(s string) {
	e.uint(uint64(len(s)))
	e.b = append(e.b, s...)
}

func (e *encoder) bytes(p []byte) {
	e.uint(uint64(len(p)))
	e.b = append(e.b, p...)
}

var (
	errTruncated = errors.New("truncated value")
	errOverflow  = errors.New("varint overflow")
)

// decoder reads fields back; the first error sticks and later reads return
// zero values, so a record decoder checks err once at the end.
type decoder struct {
	b   []byte
	err error
}

func newDecoder(value []byte) *decoder {
	switch {
	case len(value) == 0:
		return &decoder{err: errTruncated}
	case value[0] != formatVersion:
		return &decoder{err: fmt.Errorf("unknown format version %d", value[0])}
	}
	return &decoder{b: value[1:]}
}

func (d *decoder) uint() uint64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail(n)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) int() int64 {
	if d.err != nil {
		return 0
	}
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail(n)
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) fail(n int) {
	if n == 0 {
		d.err = errTruncated
		return
	}
	d.err = errOverflow
}

// bytes returns a copy of a length-prefixed field (values from badger are
// only valid inside the read callback).
func (d *decoder) bytes() []byte {
	n := d.uint()
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.err = errTruncated
		return nil
	}
	out := make([]byte, n)
	copy(out, d.b[:n])
	d.b = d.b[n:]
	return out
}

func (d *decoder) string() string {
	n := d.uint()
	if d.err != nil {
		return ""
	}
	if n > uint64(len(d.b)) {
		d.err = errTruncated
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// finish reports the first error, or trailing bytes left unread.
func (d *decoder) finish() error {
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	return d.err
}
