package coordinator

// MatchNewTopicsInLoop makes the coordinator's metadata reads leave the
// matching of new topics to the loop (as before matchAdded), for a
// baseline measured in the same run; the returned func restores it.
func MatchNewTopicsInLoop() (restore func()) {
	topicHitsInLoop.Store(true)
	return func() { topicHitsInLoop.Store(false) }
}
