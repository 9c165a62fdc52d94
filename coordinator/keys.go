package coordinator

import (
	crand "crypto/rand"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
	"github.com/capgate/capgate/store"
)

// keys holds the signing key ring (private keys never leave the data
// directory), the minter that signs with its current key, the verifier
// that checks the coordinator's own tokens, and the public key set served
// as JWKS and on the sync channel.
//
// ring is only touched by loadKeys and by rotate, which the event loop
// runs; minter, verifier and jwks are safe for concurrent use.
type keys struct {
	ring     *ocap.KeyRing
	minter   *ocap.Minter
	verifier *ocap.Verifier
	jwks     atomic.Pointer[api.JWKS]
	kids     atomic.Pointer[keyIDs]
}

// keyIDs names the ring's keys for logs and the rotate response.
type keyIDs struct {
	Current, Next, Previous string
}

// loadKeys reads the ring from the store, or makes one and stores it on
// first start.
func loadKeys(st store.Backend, snap *store.Snapshot, cfg ocap.VerifierConfig, keyFile string, now time.Time) (*keys, error) {
	ring := &ocap.KeyRing{}
	if snap.KeyRing != nil {
		if err := ring.UnmarshalBinary(snap.KeyRing); err != nil {
			return nil, fmt.Errorf("keys: load ring: %w", err)
		}
	} else {
		var err error
		if ring, err = firstRing(keyFile, now); err != nil {
			return nil, err
		}
		if err := saveRing(st, ring); err != nil {
			return nil, err
		}
	}
	minter, err := ocap.NewMinter(cfg, ring, crand.Reader)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	verifier, err := ocap.NewVerifier(cfg)
	if err != nil {
		return nil, fmt.Errorf("keys: %w", err)
	}
	k := &keys{ring: ring, minter: minter, verifier: verifier}
	if _, err := k.install(ring); err != nil {
		return nil, err
	}
	return k, nil
}

// firstRing is the ring of a first start: imported from keyFile when one
// is configured, else freshly generated.
func firstRing(keyFile string, now time.Time) (*ocap.KeyRing, error) {
	if keyFile != "" {
		ring, err := ocap.LoadKeyRingFile(keyFile)
		if err != nil {
			return nil, fmt.Errorf("keys: import key_file: %w", err)
		}
		return ring, nil
	}
	ring, err := ocap.NewKeyRing(crand.Reader, now)
	if err != nil {
		return nil, fmt.Errorf("keys: new ring: %w", err)
	}
	return ring, nil
}

func saveRing(st store.Backend, ring *ocap.KeyRing) error {
	b, err := ring.MarshalBinary()
	if err != nil {
		return fmt.Errorf("keys: encode ring: %w", err)
	}
	if err := st.Update(func(w *store.Writer) error { return w.PutKeyRing(b) }); err != nil {
		return fmt.Errorf("keys: save ring: %w", err)
	}
	return nil
}

// install makes ring the signing and verifying ring; it returns the key
// ids no longer accepted (to flush from token caches).
func (k *keys) install(ring *ocap.KeyRing) (removed []string, err error) {
	set := ring.JWKS()
	public, err := ocap.ImportJWKS(set)
	if err != nil {
		return nil, fmt.Errorf("keys: export ring: %w", err)
	}
	removed = k.verifier.SetKeys(public)
	k.minter.SetRing(ring)
	k.ring = ring
	k.jwks.Store(&set)
	ids := keyIDs{}
	if ring.Current != nil {
		ids.Current = ring.Current.ID
	}
	if ring.Next != nil {
		ids.Next = ring.Next.ID
	}
	if ring.Previous != nil {
		ids.Previous = ring.Previous.ID
	}
	k.kids.Store(&ids)
	return removed, nil
}

// rotate promotes the next key to current on a copy of the ring, stores
// the copy durably, then installs it. A failed store leaves the old ring
// in use.
func (k *keys) rotate(st store.Backend, now time.Time) (removed []string, err error) {
	b, err := k.ring.MarshalBinary()
	if err != nil {
		return nil, fmt.Errorf("keys: rotate: %w", err)
	}
	next := &ocap.KeyRing{}
	if err := next.UnmarshalBinary(b); err != nil {
		return nil, fmt.Errorf("keys: rotate: %w", err)
	}
	if err := next.Rotate(crand.Reader, now); err != nil {
		return nil, fmt.Errorf("keys: rotate: %w", err)
	}
	if err := saveRing(st, next); err != nil {
		return nil, err
	}
	return k.install(next)
}

// current is the id of the signing key.
func (k *keys) current() string { return k.kids.Load().Current }

// publicKeys is the key set gateways verify with.
func (k *keys) publicKeys() []api.JWK { return k.jwks.Load().Keys }
