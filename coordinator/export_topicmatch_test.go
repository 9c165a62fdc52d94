package coordinator

// DeferNoTenantsMatching makes the metadata reader match every tenant's
// patterns against a read's new topics before it submits the change, none
// deferred (as before the deferred matcher), for a baseline measured in
// the same run; the returned func restores it.
func DeferNoTenantsMatching() (restore func()) {
	topicMatchDeferNone.Store(true)
	return func() { topicMatchDeferNone.Store(false) }
}
