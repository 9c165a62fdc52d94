package kafkaproto

// groups holds the group members this gateway runs capgate sessions for.
type groups struct {
	s *Server
}

func newGroups(s *Server) *groups { return &groups{s: s} }

// capability returns the capability a member of this gateway holds for
// topic/partition on behalf of the Kafka client key ("" when none), and
// whether key has any member here.
func (g *groups) capability(key clientKey, topic string, partition int32) (token string, member bool) {
	return "", false
}

// closeAll ends every member session.
func (g *groups) closeAll() {}

// groupAPIs are the group coordinator's APIs.
func groupAPIs() []apiRow { return nil }

// Members is the number of group members this gateway runs sessions for.
func (s *Server) Members() int { return s.groups.count() }

func (g *groups) count() int { return 0 }
