package coordinator

import (
	"crypto/rand"
	"sync/atomic"

	"github.com/capgate/capgate/ocap"
)

// ToggleMinting readies a coordinator built by New and not yet running
// for a test of a mint that fails after members joined, for a while or
// for good: its minter (on the same key ring) fails like BreakMinting's
// while the returned function was last called with true, and draws from
// crypto/rand otherwise. Before Run nothing else reads the minter; the
// switch is atomic.
func ToggleMinting(c *Coordinator) (setBroken func(bool), err error) {
	entropy := &switchedEntropy{}
	minter, err := ocap.NewMinter(c.cfg.verifierConfig(), c.keys.ring, entropy)
	if err != nil {
		return nil, err
	}
	c.keys.minter = minter
	return entropy.broken.Store, nil
}

// switchedEntropy is crypto/rand unless broken.
type switchedEntropy struct{ broken atomic.Bool }

func (e *switchedEntropy) Read(p []byte) (int, error) {
	if e.broken.Load() {
		return failingEntropy{}.Read(p)
	}
	return rand.Read(p)
}
