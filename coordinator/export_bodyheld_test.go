package coordinator

// BodiesHeld is the request body bytes c counts as being read now.
func BodiesHeld(c *Coordinator) int64 { return c.bodies.Held() }
