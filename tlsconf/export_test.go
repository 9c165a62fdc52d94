package tlsconf

import "time"

// SetClock replaces the reload clock of s.
func SetClock(s *Server, now func() time.Time) { s.setClock(now) }
