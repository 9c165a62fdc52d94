package coordinator

// AnswerBytesHeld is the answer bytes held now (answers.go).
func AnswerBytesHeld(c *Coordinator) int64 { return c.answers.Held() }
