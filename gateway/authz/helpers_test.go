package authz

import (
	"crypto/ed25519"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

var t0 = time.Unix(1_800_000_000, 0)

const leeway = 2 * time.Second

func part(p int32) *int32 { return &p }

// jti makes a valid 22-character jti from n.
func jti(n int) string {
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
	b := []byte("AAAAAAAAAAAAAAAAAAAAAA")
	for i := 0; n > 0 && i < 21; i++ {
		b[i] = alphabet[n%64]
		n /= 64
	}
	return string(b)
}

// capability is a fetch+produce capability for billing/orders/3 at epoch 5,
// alive from t0 for a minute.
func capability() *ocap.Claims {
	return &ocap.Claims{
		Subject: "member-1", ID: jti(1), IssuedAt: ocap.Seconds(t0.Unix()), ExpiresAt: ocap.Seconds(t0.Unix() + 60),
		Group: "billing", Topic: "orders", Partition: part(3), Epoch: 5,
		Ops: ocap.Ops(ocap.OpFetch | ocap.OpProduce),
	}
}

func fetchReq(offset int64) Request {
	return Request{Topic: "orders", Partition: 3, Op: ocap.OpFetch, Offset: offset}
}

func newView() *View { return NewView(Config{Leeway: leeway}) }

func mustApply(t testing.TB, v *View, u api.SyncResponse, now time.Time) Changes {
	t.Helper()
	ch, err := v.Apply(u, now)
	if err != nil {
		t.Fatalf("Apply: %v", err)
	}
	return ch
}

// seededReader is a deterministic io.Reader for keys and jtis.
type seededReader struct{ r *rand.ChaCha8 }

func (s seededReader) Read(p []byte) (int, error) { return s.r.Read(p) }

func newSeeded(seed byte) seededReader {
	var s [32]byte
	s[0] = seed
	return seededReader{rand.NewChaCha8(s)}
}

// testJWK is a valid public JWK from seed.
func testJWK(t testing.TB, seed byte) api.JWK {
	t.Helper()
	k, err := ocap.GenerateKey(newSeeded(seed), t0)
	if err != nil {
		t.Fatal(err)
	}
	return ocap.PublicJWK(k.ID, k.Private.Public().(ed25519.PublicKey))
}
