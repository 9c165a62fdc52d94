package ocap

import (
	"bytes"
	"strings"
	"testing"
)

// TestNewJTINeverBeginsWithDash: a jti is a command-line argument
// (capgate admin revoke-capability JTI), where a leading '-' reads as a
// flag. Random bytes whose top six bits are 62 ('-' in base64url) come
// out as another character, and every jti still verifies as one.
func TestNewJTINeverBeginsWithDash(t *testing.T) {
	f := newFixture(t)
	for _, first := range []byte{0xf8, 0xf9, 0xfa, 0xfb} { // 0b111110xx: '-'
		f.minter.rand = bytes.NewReader(append([]byte{first}, bytes.Repeat([]byte{0x5a}, 15)...))
		jti, err := f.minter.NewJTI()
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(jti, "-") || !validJTI(jti) {
			t.Fatalf("random first byte %#x gave jti %q", first, jti)
		}
	}
	f.minter.rand = newSeeded(7)
	for i := 0; i < 2000; i++ {
		jti, err := f.minter.NewJTI()
		if err != nil {
			t.Fatal(err)
		}
		if jti[0] == '-' || !validJTI(jti) {
			t.Fatalf("jti %q", jti)
		}
	}
}
