package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
)

type produceFlags struct {
	topic        string
	partition    int32
	keySeparator string
	capability   string
	token        string
	tokenFile    string
	endpoints    endpointFlags
	ttl          time.Duration
	batchRecords int
	batchBytes   int
}

func newProduceCmd() *cobra.Command {
	f := &produceFlags{}
	cmd := &cobra.Command{
		Use:   "produce --topic T [--partition P]",
		Short: "Produce the lines of stdin to one partition through a gateway",
		Long: "Reads stdin line by line and produces each line as one record to TOPIC/PARTITION\n" +
			"through the gateways, with a capability holding the produce op: --capability\n" +
			"(or $CAPGATE_CAPABILITY), or one minted for the purpose through the admin API\n" +
			"with an admin token (--token-file credentials.json from capgate dev, or\n" +
			"$CAPGATE_ADMIN_TOKEN). Lines that arrive together are sent together.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runProduce(cmd.Context(), cmd.InOrStdin(), cmd.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.topic, "topic", "", "topic to produce to (required)")
	fl.Int32Var(&f.partition, "partition", 0, "partition to produce to")
	fl.StringVar(&f.keySeparator, "key-separator", "", "split each line into key and value at the first occurrence of this string (kcat's -K)")
	fl.StringVar(&f.capability, "capability", "", "capability with the produce op for TOPIC/PARTITION ($CAPGATE_CAPABILITY)")
	fl.StringVar(&f.token, "token", "", "admin token to mint a produce capability with ($CAPGATE_ADMIN_TOKEN)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the admin token, or credentials.json from capgate dev")
	f.endpoints.register(cmd)
	fl.DurationVar(&f.ttl, "capability-ttl", 5*time.Minute, "lifetime of a minted capability (renewed while producing; at most the coordinator's max_lease)")
	fl.IntVar(&f.batchRecords, "batch-records", 500, "most records sent in one request")
	fl.IntVar(&f.batchBytes, "batch-bytes", 1<<20, "most key and value bytes sent in one request")
	cmd.MarkFlagRequired("topic")
	return cmd
}

// capabilitySource yields the capability to produce with, minting a new
// one through the admin API when the minted one is about to expire.
type capabilitySource struct {
	fixed   string
	admin   *adminClient
	request coordinator.SharedGrantRequest
	current string
	expires time.Time
}

func (f *produceFlags) capabilitySource() (*capabilitySource, error) {
	if f.capability != "" {
		return &capabilitySource{fixed: f.capability}, nil
	}
	if c := os.Getenv("CAPGATE_CAPABILITY"); c != "" && f.token == "" && f.tokenFile == "" {
		return &capabilitySource{fixed: c}, nil
	}
	token, err := secretFrom(f.token, f.tokenFile, "CAPGATE_ADMIN_TOKEN", "admin_token")
	if err != nil {
		return nil, errors.New("no produce capability: pass --capability (or set CAPGATE_CAPABILITY), or an admin token to mint one: --token-file (credentials.json from capgate dev works), --token or CAPGATE_ADMIN_TOKEN")
	}
	hc, err := f.endpoints.tls.httpClient(30 * time.Second)
	if err != nil {
		return nil, err
	}
	return &capabilitySource{
		admin:   &adminClient{base: strings.TrimRight(f.endpoints.coordinator, "/"), token: token, http: hc},
		request: coordinator.SharedGrantRequest{Topic: f.topic, Partition: f.partition, Ops: []string{"produce"}, TTLMs: f.ttl.Milliseconds(), Holder: "capgate-produce"},
	}, nil
}

// get returns a capability valid for at least a minute (or a third of
// its ttl), minting one if needed.
func (s *capabilitySource) get(ctx context.Context) (string, error) {
	if s.fixed != "" {
		return s.fixed, nil
	}
	margin := min(time.Minute, time.Duration(s.request.TTLMs)*time.Millisecond/3)
	if s.current != "" && time.Until(s.expires) > margin {
		return s.current, nil
	}
	var resp api.CapabilityResponse
	if err := s.admin.do(ctx, http.MethodPost, "/v1/admin/capabilities", s.request, &resp); err != nil {
		return "", fmt.Errorf("produce: mint capability: %w", err)
	}
	expires, err := time.Parse(time.RFC3339, resp.ExpiresAt)
	if err != nil {
		return "", fmt.Errorf("produce: mint capability: expires_at %q: %w", resp.ExpiresAt, err)
	}
	s.current, s.expires = resp.Capability, expires
	return s.current, nil
}

func runProduce(ctx context.Context, stdin io.Reader, stderr io.Writer, f *produceFlags) error {
	if f.batchRecords < 1 || f.batchBytes < 1 {
		return fmt.Errorf("--batch-records and --batch-bytes: must be >= 1, got %d and %d", f.batchRecords, f.batchBytes)
	}
	caps, err := f.capabilitySource()
	if err != nil {
		return err
	}
	capability, err := caps.get(ctx)
	if err != nil {
		return err
	}
	prod, err := client.NewProducer(f.endpoints.gateways, capability, client.WithTLS(f.endpoints.tls.files()))
	if err != nil {
		return err
	}
	lines := readLines(ctx, stdin)
	var count int
	var first, last int64 = -1, -1
	for {
		batch, readErr := nextBatch(ctx, lines, f)
		if len(batch) > 0 {
			if capability, err = caps.get(ctx); err != nil {
				return err
			}
			prod.SetCapability(capability)
			base, err := prod.Produce(ctx, f.topic, f.partition, batch)
			if err != nil {
				return fmt.Errorf("produce %s/%d after %d records: %w", f.topic, f.partition, count, err)
			}
			if first < 0 {
				first = base
			}
			last = base + int64(len(batch)) - 1
			count += len(batch)
		}
		if readErr != nil {
			if errors.Is(readErr, io.EOF) {
				break
			}
			return fmt.Errorf("produce: %w", readErr)
		}
	}
	if count == 0 {
		fmt.Fprintf(stderr, "produced 0 records to %s/%d\n", f.topic, f.partition)
		return nil
	}
	fmt.Fprintf(stderr, "produced %d records to %s/%d (offsets %d..%d)\n", count, f.topic, f.partition, first, last)
	return nil
}

// line is one line of stdin, or the error that ended reading.
type line struct {
	text []byte
	err  error
}

// readLines reads stdin in a goroutine, so lines already typed can be sent
// while the next is awaited.
func readLines(ctx context.Context, r io.Reader) <-chan line {
	out := make(chan line, 1024)
	go func() {
		defer close(out)
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			b, err := br.ReadBytes('\n')
			b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
			if len(b) > 0 || (err == nil) {
				select {
				case out <- line{text: b}:
				case <-ctx.Done():
					return
				}
			}
			if err != nil {
				select {
				case out <- line{err: err}:
				case <-ctx.Done():
				}
				return
			}
		}
	}()
	return out
}

// nextBatch waits for one line, then takes the lines already read, up to
// the batch bounds. The error is io.EOF at the end of stdin.
func nextBatch(ctx context.Context, lines <-chan line, f *produceFlags) ([]client.Record, error) {
	var batch []client.Record
	size := 0
	take := func(l line) error {
		if l.err != nil {
			return l.err
		}
		rec := client.Record{Value: l.text}
		if f.keySeparator != "" {
			if k, v, ok := bytes.Cut(l.text, []byte(f.keySeparator)); ok {
				rec.Key, rec.Value = k, v
			}
		}
		batch = append(batch, rec)
		size += len(rec.Key) + len(rec.Value)
		return nil
	}
	select {
	case <-ctx.Done():
		return nil, ctx.Err()
	case l, ok := <-lines:
		if !ok {
			return nil, io.EOF
		}
		if err := take(l); err != nil {
			return nil, err
		}
	}
	for len(batch) < f.batchRecords && size < f.batchBytes {
		select {
		case l, ok := <-lines:
			if !ok {
				return batch, io.EOF
			}
			if err := take(l); err != nil {
				return batch, err
			}
		default:
			return batch, nil
		}
	}
	return batch, nil
}
