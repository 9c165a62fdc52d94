package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client/driver"
	"github.com/capgate/capgate/client/session"
)

// fetcher reads a partition from one gateway (client/driver picks which,
// and when to fail over), and fetches ahead while records flow (ahead.go).
// Its fetches (fetched ahead included) take slots of the consumer's
// FetchPool, shared with the process's other consumers of the same
// gateway address (fetchpool.go), at most Config.GatewayFetchesMax of
// them; the ones past it wait their turn, and their timeout starts with
// their request.
type fetcher struct {
	cfg      Config
	gateways []fetchGateway
	base     context.Context // the consumer's: fetches ahead end with it

	running sync.WaitGroup // fetches ahead (started under mu while base is alive)

	mu      sync.Mutex
	aheads  map[session.Partition]*ahead // not asked for yet; at most one per partition
	claimed map[session.Partition]*ahead // asked for, still running
	stopped map[session.Partition]bool   // nothing ahead until the session asks again
}

// fetchGateway is one gateway as a fetcher sees it.
type fetchGateway struct {
	url   string     // base URL, without trailing slashes
	slots *fairSlots // the pool's, of its address
	user  *slotUser  // this consumer's account there
	tr    *transport // fetches to it go through
}

// newFetcher fetches from urls (without trailing slashes) through trs
// (one per URL), taking pool's slots of each URL's address.
func newFetcher(base context.Context, cfg Config, pool *FetchPool, trs []*transport, urls []string) *fetcher {
	gateways := make([]fetchGateway, len(urls))
	for i, u := range urls {
		gateways[i] = fetchGateway{url: u, slots: pool.slotsOf(u), user: newSlotUser(cfg.GatewayFetchesMax), tr: trs[i]}
	}
	return &fetcher{cfg: cfg, gateways: gateways, base: base, aheads: map[session.Partition]*ahead{},
		claimed: map[session.Partition]*ahead{}, stopped: map[session.Partition]bool{}}
}

// url is gateway i's base URL.
func (f *fetcher) url(i int) string { return f.gateways[i].url }

// fetchFrom fetches req from gateway i, or takes the answer fetched
// ahead for exactly req, and decodes the answer. timeout bounds the
// wait for an answer fetched ahead, and the request from when it has
// its slot (0: ctx alone).
func (f *fetcher) fetchFrom(ctx context.Context, i int, req session.Fetch, timeout time.Duration) (driver.Fetched, error) {
	claimCtx, cancel := withTimeout(ctx, timeout)
	res, err, ok := f.claim(claimCtx, req)
	cancel()
	if !ok {
		res, err = f.fetchOnce(ctx, i, req, f.onNext(i, req), timeout)
	}
	if err != nil {
		return driver.Fetched{}, err
	}
	return driver.Fetched{Records: len(res.records), Bytes: res.bytes, Next: res.next, Payload: res.records}, nil
}

// withTimeout is ctx bounded by timeout (0: ctx as it is).
func withTimeout(ctx context.Context, timeout time.Duration) (context.Context, context.CancelFunc) {
	if timeout <= 0 {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, timeout)
}

// acquire takes a slot of gateway i for this consumer, waiting its turn
// while ctx lives (fairSlots: consumers in turn, each one's fetches in
// order).
func (f *fetcher) acquire(ctx context.Context, i int) error {
	g := f.gateways[i]
	return g.slots.acquire(ctx, g.user)
}

func (f *fetcher) release(i int) {
	g := f.gateways[i]
	g.slots.release(g.user)
}

// fetchOnce is one fetch of req from gateway i, once one of its slots is
// free; timeout (0: none) bounds it from then on. onHeaders (may be nil)
// sees the headers of the answer before its body is read.
func (f *fetcher) fetchOnce(ctx context.Context, i int, req session.Fetch, onHeaders func(http.Header), timeout time.Duration) (fetched, error) {
	op := "fetch " + req.Partition.String()
	if err := f.acquire(ctx, i); err != nil {
		return fetched{}, fmt.Errorf("client: %s: waiting for a fetch slot of %s: %w", op, f.url(i), err)
	}
	defer f.release(i)
	ctx, cancel := withTimeout(ctx, timeout)
	defer cancel()
	q := url.Values{}
	q.Set("offset", offsetParam(req.Offset))
	maxBytes := req.MaxBytes
	if maxBytes <= 0 {
		maxBytes = f.cfg.FetchMaxBytes
	}
	q.Set("max_bytes", strconv.FormatInt(int64(maxBytes), 10))
	q.Set("max_wait_ms", strconv.FormatInt(f.cfg.FetchMaxWait.Milliseconds(), 10))
	r := request{method: http.MethodGet, url: recordsURL(f.url(i), req.Partition) + "?" + q.Encode(), bearer: req.Capability, accept: api.MediaJSON, onHeaders: onHeaders}
	if f.cfg.Raw {
		r.accept = api.MediaRecordBatch
	}
	limit := max(64<<20, 4*int64(f.cfg.FetchMaxBytes))
	resp, body, err := f.gateways[i].tr.do(ctx, op, r, limit)
	if err != nil {
		return fetched{}, err
	}
	var res fetched
	if f.cfg.Raw {
		res, err = decodeRaw(resp, body, req)
	} else {
		res, err = decodeJSON(body, req)
	}
	if err != nil {
		return fetched{}, fmt.Errorf("client: %s: %w", op, err)
	}
	return res, nil
}

// fetched is a decoded answer.
type fetched struct {
	records []Record
	bytes   int64
	next    int64
}

func recordsURL(base string, p Partition) string {
	return base + "/v1/topics/" + url.PathEscape(p.Topic) + "/partitions/" + strconv.FormatInt(int64(p.Partition), 10) + "/records"
}

// decodeRaw reads raw record batches (batches.go: decompression and CRC
// checks included, control records dropped).
func decodeRaw(resp *http.Response, body []byte, req session.Fetch) (fetched, error) {
	res, err := decodeBatches(body, req, decompressor)
	if err != nil {
		return fetched{}, err
	}
	if next, err := strconv.ParseInt(resp.Header.Get(api.HeaderNextOffset), 10, 64); err == nil {
		res.next = max(res.next, next)
	}
	return res, nil
}

// decompressor is kgo's, shared: it pools its decoders.
var decompressor = kgo.DefaultDecompressor()

// offsetParam renders a fetch offset; Kafka's sentinels (a grant whose
// start the coordinator could not look up) become the words the gateway
// resolves: -2 earliest, -1 latest.
func offsetParam(offset int64) string {
	switch offset {
	case -2:
		return "earliest"
	case -1:
		return "latest"
	}
	return strconv.FormatInt(offset, 10)
}
