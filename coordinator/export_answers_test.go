package coordinator

// AnswerBytesHeld is the answer bytes held now (answers.go).
func AnswerBytesHeld(c *Coordinator) int64 { return c.answers.Held() }

// MetricsRenders is how many times GET /metrics rendered the registry.
func MetricsRenders(c *Coordinator) uint64 { return c.metrics.scrape.Renders() }
