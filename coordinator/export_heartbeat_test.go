package coordinator

import (
	"crypto/rand"
	"sync/atomic"

	"github.com/capgate/capgate/ocap"
)

// SwitchMinting readies a coordinator built by New and not yet running
// for a test of a mint that fails after members joined: its minter (on
// the same key ring) draws from crypto/rand until the returned function
// is called, and from then on fails like BreakMinting's. Before Run
// nothing else reads the minter; the switch is atomic.
func SwitchMinting(c *Coordinator) (breakMinting func(), err error) {
	entropy := &switchedEntropy{}
	minter, err := ocap.NewMinter(c.cfg.verifierConfig(), c.keys.ring, entropy)
	if err != nil {
		return nil, err
	}
	c.keys.minter = minter
	return func() { entropy.broken.Store(true) }, nil
}

// switchedEntropy is crypto/rand until broken.
type switchedEntropy struct{ broken atomic.Bool }

func (e *switchedEntropy) Read(p []byte) (int, error) {
	if e.broken.Load() {
		return failingEntropy{}.Read(p)
	}
	return rand.Read(p)
}
