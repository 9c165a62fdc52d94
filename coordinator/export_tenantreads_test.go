package coordinator

import "github.com/capgate/capgate/ocap"

// HoldTenantReads takes every place of the tenant group reads the
// credential's tenant may have in progress at once, as that many reads
// still running would; release gives them back.
func HoldTenantReads(c *Coordinator, credential string) (release func(), err error) {
	claims, err := c.signatureFor(budget{}, []byte(credential), ocap.KindClient)
	if err != nil {
		return nil, err
	}
	c.tenantReads.mu.Lock()
	defer c.tenantReads.mu.Unlock()
	if c.tenantReads.n == nil {
		c.tenantReads.n = map[string]int{}
	}
	key := tenant(claims)
	c.tenantReads.n[key] += tenantReadsMax
	return func() {
		c.tenantReads.mu.Lock()
		defer c.tenantReads.mu.Unlock()
		if c.tenantReads.n[key] -= tenantReadsMax; c.tenantReads.n[key] <= 0 {
			delete(c.tenantReads.n, key)
		}
	}, nil
}
