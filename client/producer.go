package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"go.uber.org/zap"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/tlsconf"
)

// Producer writes records through the gateways with a capability holding
// the produce op (one partition per capability).
type Producer struct {
	tr      *transport
	pool    *gatewayPool
	log     *zap.Logger
	ownHTTP bool

	mu         sync.RWMutex
	capability string
}

// NewProducer builds a producer for the gateways at gatewayURLs.
func NewProducer(gatewayURLs []string, capability string, opts ...Option) (*Producer, error) {
	if len(gatewayURLs) == 0 {
		return nil, fmt.Errorf("client: producer gateways: must list at least one URL, got none")
	}
	for _, u := range gatewayURLs {
		if err := validateURL("client: producer gateways", u); err != nil {
			return nil, err
		}
	}
	if capability == "" {
		return nil, fmt.Errorf("client: producer capability: must not be empty")
	}
	o, err := buildOptions(opts, tlsconf.ClientConfig{})
	if err != nil {
		return nil, err
	}
	d := DefaultConfig()
	return &Producer{
		tr:         &transport{http: o.http, backoff: backoff{base: d.RetryBackoff, max: d.RetryBackoffMax}},
		pool:       newGatewayPool(gatewayURLs),
		log:        o.log,
		ownHTTP:    o.ownHTTP,
		capability: capability,
	}, nil
}

// Close closes the producer's idle connections (those of its own HTTP
// client; one given with WithHTTPClient is the caller's). Produce calls
// still in flight finish; later ones open new connections.
func (p *Producer) Close() {
	if p.ownHTTP {
		p.tr.http.CloseIdleConnections()
	}
}

// SetCapability replaces the capability (a renewed or re-granted one).
func (p *Producer) SetCapability(capability string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.capability = capability
}

// Produce appends records (Key, Value, Headers; other fields ignored) to
// topic/partition and returns the offset of the first. A request that
// certainly did not produce (connection refused, 503 before producing,
// 429) is retried, on the next gateway for the first two, until ctx ends;
// any other failure is returned, since the records may have been written.
// The records go in one request, written as one batch (their offsets are
// consecutive), so one call is bounded by the gateway's max_body_bytes
// (4 MiB of JSON) and max_produce_records (10,000 records): beyond either
// the gateway answers 413 or 400 naming the setting, nothing is written,
// and Produce returns that error — split larger sets into several calls.
func (p *Producer) Produce(ctx context.Context, topic string, partition int32, records []Record) (int64, error) {
	req := api.ProduceRequest{Records: make([]api.ProduceRecord, len(records))}
	for i, r := range records {
		req.Records[i] = api.ProduceRecord{Key: r.Key, Value: r.Value, Headers: r.Headers}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return 0, fmt.Errorf("client: produce: encode: %w", err)
	}
	part := Partition{Topic: topic, Partition: partition}
	op := "produce " + part.String()
	for round := 0; ; {
		i, base := p.pool.pick()
		p.mu.RLock()
		r := request{method: http.MethodPost, url: recordsURL(base, part), bearer: p.capability, accept: api.MediaJSON, body: body}
		p.mu.RUnlock()
		_, answer, err := p.tr.do(ctx, op, r, maxCoordinatorBody)
		if err == nil {
			var resp api.ProduceResponse
			if err := json.Unmarshal(answer, &resp); err != nil {
				return 0, fmt.Errorf("client: %s: decode answer: %w", op, err)
			}
			return resp.BaseOffset, nil
		}
		again, moved := produceRetry(err)
		if !again || ctx.Err() != nil {
			return 0, err
		}
		if moved {
			p.pool.fail(i)
		}
		p.log.Debug("produce failed, retrying", zap.String("gateway", base), zap.Error(err))
		if !moved || (round+1)%len(p.pool.urls) == 0 {
			if p.tr.backoff.wait(ctx, round, retryHint(err)) != nil {
				return 0, err
			}
		}
		round++
	}
}

// produceRetry decides whether a failed produce may be sent again, and
// whether to another gateway.
func produceRetry(err error) (again, failover bool) {
	var e *Error
	if errors.As(err, &e) {
		switch e.Code {
		case api.CodeNotReady, api.CodeOutOfSync:
			return true, true
		case api.CodeRateLimited:
			return true, false
		}
		return false, false
	}
	if unsent(err) {
		return true, true
	}
	return false, false
}
