package coordinator

import (
	"errors"
	"time"

	"github.com/capgate/capgate/ocap"
)

// BreakMinting readies a coordinator built by New and not yet running
// for a test of a mint that fails after a join made its member: it
// mints a client credential for groups and topics with the coordinator's
// own minter, then gives the coordinator a minter on the same key ring
// whose entropy source fails (as crypto/rand can), so every token it
// mints from then on — a join's member token first — fails. Before Run
// nothing else reads the minter.
func BreakMinting(c *Coordinator, groups, topics []string) (string, error) {
	credential, _, err := c.keys.minter.Mint(ocap.KindClient, ocap.Claims{Subject: "svc", Groups: groups, Topics: topics},
		c.now(), time.Hour)
	if err != nil {
		return "", err
	}
	broken, err := ocap.NewMinter(c.cfg.verifierConfig(), c.keys.ring, failingEntropy{})
	if err != nil {
		return "", err
	}
	if _, err := broken.NewJTI(); err == nil {
		return "", errors.New("the broken minter still draws jtis")
	}
	c.keys.minter = broken
	return credential, nil
}

// failingEntropy is an entropy source that has failed.
type failingEntropy struct{}

func (failingEntropy) Read([]byte) (int, error) { return 0, errors.New("entropy source failed") }
