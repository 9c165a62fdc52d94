package tlsconf

import "time"

// SetClock replaces the reload clock of s.
func SetClock(s *Server, now func() time.Time) { s.setClock(now) }

// SetClientClock replaces the CA bundle's reload clock of c.
func SetClientClock(c *Client, now func() time.Time) { c.setClock(now) }
