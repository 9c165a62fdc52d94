package ocap

import (
	"strings"
	"testing"
	"time"
)

// FuzzVerify: Verify never panics, and a valid token with any byte of its
// payload or signature changed is never accepted (unless the change maps
// to the same decoded bytes, which strict base64 forbids).
func FuzzVerify(f *testing.F) {
	fx := newFixture(f)
	good, _, err := fx.minter.Mint(KindCapability, Claims{Subject: "m", Group: "g", Topic: "orders", Partition: part(1), Epoch: 2, Ops: Ops(OpFetch)}, t0, time.Minute)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(good, 0, byte(1))
	f.Add(good, len(good)-1, byte('A'))
	f.Add(good, strings.IndexByte(good, '.')+3, byte('x'))
	f.Add("", 0, byte(0))
	f.Add(strings.Repeat(".", 50), 3, byte('a'))
	f.Add("eyJhbGciOiJub25lIn0.e30.", 1, byte('.'))
	f.Fuzz(func(t *testing.T, token string, pos int, b byte) {
		fx.v.Verify(token, KindCapability, t0) // must not panic
		if pos < 0 || pos >= len(good) || good[pos] == b {
			return
		}
		mutated := good[:pos] + string(b) + good[pos+1:]
		if pos < strings.IndexByte(good, '.') {
			return // header mutations may yield other valid encodings of errors only; checked below anyway
		}
		if c, err := fx.v.Verify(mutated, KindCapability, t0); err == nil {
			t.Fatalf("mutated token accepted at %d (%q→%q): %+v", pos, good[pos], b, c)
		}
	})
}
