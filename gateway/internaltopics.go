package gateway

// Behavior: topics no client is granted. Kafka's own (a leading "__") and
// every capgate state log on this Kafka (the reserved capgate-state* name
// space, ocap.InternalTopic), plus the coordinator's own state topics
// under an older name outside that name space (learned on sync:
// guard.Settings.InternalTopics). The Kafka listener asks internalTopic
// (kafkaproto.Config.InternalTopic) for Metadata, ListOffsets and
// Produce; the HTTP fetch and produce refuse such a topic with 403
// forbidden even under a capability that verifies (one minted before the
// name was reserved, or by a coordinator of an older version: no grant
// path of this one mints it).

import (
	"slices"
	"strconv"

	"github.com/valyala/fasthttp"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/ocap"
)

// internalTopic reports whether topic is one no client is granted.
func (g *Gateway) internalTopic(topic string) bool {
	if ocap.InternalTopic(topic) {
		return true
	}
	v := g.follower.Settings()
	return v != nil && slices.Contains(v.InternalTopics, topic)
}

// refuseInternalTopic answers 403 forbidden for a topic no client is
// granted and returns its code; "" for any other topic.
func (g *Gateway) refuseInternalTopic(ctx *fasthttp.RequestCtx, topic string) api.Code {
	if !g.internalTopic(topic) {
		return ""
	}
	writeError(ctx, api.CodeForbidden, "topic "+strconv.Quote(topic)+" is internal (Kafka's own or a capgate state log): no client is served it", nil)
	return api.CodeForbidden
}
