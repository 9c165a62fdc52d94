package coordinator

import "github.com/capgate/capgate/store"

// StoreOf exposes the coordinator's store to tests that corrupt it.
func StoreOf(c *Coordinator) store.Backend { return c.store }
