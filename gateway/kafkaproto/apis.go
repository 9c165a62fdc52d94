package kafkaproto

import (
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// apiRow is one implemented Kafka API: the versions we parse and answer,
// whether it may be sent before SASL completed, and its handler. A handler
// returns the response (nil: none is written, as for acks=0 Produce) or an
// error, which closes the connection.
type apiRow struct {
	key      int16
	min, max int16
	preAuth  bool
	// bodyMax, if not 0, bounds the request body: beyond, the
	// connection closes before kmsg decodes it (adminrefused.go).
	bodyMax int
	handle  func(c *conn, h header, req kmsg.Request) (kmsg.Response, error)
}

// apis is the table ApiVersions answers with: exactly what is answered —
// served, or (the admin APIs of adminrefused.go) refused with a reason.
// Versions are capped where a later one would change what we must do
// (Fetch and Produce stay on topic names: v12 and v11; Metadata v12
// carries topic ids, which KIP-848 assignments use). No fetch sessions
// are offered (every Fetch answers session id 0, so clients send full
// fetches) and no OffsetForLeaderEpoch: partitions are advertised with
// leader epoch -1, so clients never validate epochs against us.
var apis []apiRow

func init() {
	apis = []apiRow{
		{key: int16(kmsg.Produce), min: 3, max: 11, handle: handleProduce},
		{key: int16(kmsg.Fetch), min: 4, max: 12, handle: handleFetch},
		{key: int16(kmsg.ListOffsets), min: 1, max: 7, handle: handleListOffsets},
		{key: int16(kmsg.Metadata), min: 1, max: 12, handle: handleMetadata},
		{key: int16(kmsg.SASLHandshake), min: 0, max: 1, preAuth: true, handle: handleSASLHandshake},
		{key: int16(kmsg.ApiVersions), min: 0, max: 3, preAuth: true, handle: handleApiVersions},
		{key: int16(kmsg.InitProducerID), min: 0, max: 4, handle: handleInitProducerID},
		{key: int16(kmsg.SASLAuthenticate), min: 0, max: 2, preAuth: true, handle: handleSASLAuthenticate},
		{key: int16(kmsg.DescribeGroups), min: 0, max: 5, handle: handleDescribeGroups},
		{key: int16(kmsg.ListGroups), min: 0, max: 5, handle: handleListGroups},
		{key: int16(kmsg.ConsumerGroupDescribe), min: 0, max: 1, handle: handleConsumerGroupDescribe},
		{key: int16(kmsg.DescribeCluster), min: 0, max: 2, handle: handleDescribeCluster},
	}
	apis = append(apis, groupAPIs()...)
	apis = append(apis, refusedAdminAPIs()...)
	slices.SortFunc(apis, func(a, b apiRow) int { return int(a.key) - int(b.key) })
}

// lookupAPI finds key's row.
func lookupAPI(key int16) (apiRow, bool) {
	i, ok := slices.BinarySearchFunc(apis, key, func(r apiRow, k int16) int { return int(r.key) - int(k) })
	if !ok {
		return apiRow{}, false
	}
	return apis[i], true
}

// handleApiVersions lists the table.
func handleApiVersions(_ *conn, _ header, kreq kmsg.Request) (kmsg.Response, error) {
	req := kreq.(*kmsg.ApiVersionsRequest)
	resp := req.ResponseKind().(*kmsg.ApiVersionsResponse)
	resp.ApiKeys = apiVersionKeys()
	return resp, nil
}

// unsupportedApiVersions answers an ApiVersions request of a version we
// do not implement: UNSUPPORTED_VERSION in the v0 format, with the table,
// so the client retries with a version we speak (KIP-511).
func unsupportedApiVersions() kmsg.Response {
	resp := kmsg.NewPtrApiVersionsResponse()
	resp.SetVersion(0)
	resp.ErrorCode = 35 // UNSUPPORTED_VERSION
	resp.ApiKeys = apiVersionKeys()
	return resp
}

func apiVersionKeys() []kmsg.ApiVersionsResponseApiKey {
	out := make([]kmsg.ApiVersionsResponseApiKey, 0, len(apis))
	for _, a := range apis {
		k := kmsg.NewApiVersionsResponseApiKey()
		k.ApiKey, k.MinVersion, k.MaxVersion = a.key, a.min, a.max
		out = append(out, k)
	}
	return out
}
