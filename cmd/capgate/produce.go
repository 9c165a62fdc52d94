package main

import (
	"bufio"
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/capgate/capgate/api"
	"github.com/capgate/capgate/client"
	"github.com/capgate/capgate/coordinator"
)

type produceFlags struct {
	topic        string
	partition    int32
	partitioned  bool // no --partition: partition as Kafka's default partitioner
	keySeparator string
	capability   string
	credential   string
	credFile     string
	token        string
	tokenFile    string
	endpoints    endpointFlags
	ttl          time.Duration
	batchRecords int
	batchBytes   int
	output       string // text (summary lines on stderr) or json (also one object on stdout)
}

func newProduceCmd() *cobra.Command {
	f := &produceFlags{}
	cmd := &cobra.Command{
		Use:   "produce -t TOPIC [-p PARTITION] [-K SEPARATOR] [-o json]",
		Short: "Produce the lines of stdin to a topic through a gateway",
		Long: "Reads stdin line by line and produces each line as one record to TOPIC through\n" +
			"the gateways. Without --partition, records go where Kafka's default\n" +
			"partitioner puts them: a keyed record (--key-separator) to murmur2(key) modulo\n" +
			"the partition count, exactly as the Java client and franz-go do; records\n" +
			"without a key are sticky, as Kafka's producers (KIP-480): the lines that\n" +
			"arrive together (up to --batch-records/--batch-bytes) are one write to one\n" +
			"partition, the next batch's to the next partition, starting from a random\n" +
			"one. Records are written with one of:\n" +
			"  --capability (or $CAPGATE_CAPABILITY): a capability holding the produce op;\n" +
			"    it covers one partition, so --partition is needed;\n" +
			"  --credential / --credential-file (or $CAPGATE_CREDENTIAL): a client credential\n" +
			"    whose ops include produce and whose topics name TOPIC exactly (capgate admin\n" +
			"    client-credential --ops consume,produce --topics TOPIC); no admin token is\n" +
			"    involved; without --partition the gateway places each record (POST\n" +
			"    /v1/topics/TOPIC/records: Kafka's default partitioner over the topic's\n" +
			"    current partition count, a batch's keyless records to one random\n" +
			"    partition);\n" +
			"  an admin token (--token-file credentials.json from capgate dev, --token, or\n" +
			"    $CAPGATE_ADMIN_TOKEN): capabilities are minted for the purpose.\n" +
			"Flags win over the environment; of the variables, CAPGATE_CAPABILITY is used\n" +
			"first, then CAPGATE_ADMIN_TOKEN, then CAPGATE_CREDENTIAL (capgate dev's is\n" +
			"consume only). Lines that arrive together are sent together.\n\n" +
			"Each minted capability is an admin action: one entry of the coordinator's\n" +
			"audit log (action capabilities, target capgate-produce@TOPIC/PARTITION) and one\n" +
			"\"admin action\" log line. Without --partition, a run mints one for partition\n" +
			"0 first (its answer tells the partition count), then one for each other\n" +
			"partition it writes: a batch of keyless lines writes one, so 200 lines piped\n" +
			"in at once mint at most 2. A partition still written when its capability nears its\n" +
			"end (--capability-ttl) gets a new one. --partition mints one; --capability\n" +
			"and a credential mint none. To leave them out of the audit view:\n" +
			"capgate admin audit --exclude-target capgate-produce@\n\n" +
			"What was written is summed up on stderr, one line per partition; with -o json\n" +
			"stdout also gets one JSON object for scripts: the topic, the records written\n" +
			"and, per partition, its base (first) offset, last offset and count — also\n" +
			"when a failure (a record too large, a refusal) ends it with exit 1 after\n" +
			"some were written: the lines not summed up were not. Ctrl-C ends it with\n" +
			"exit 1: \"interrupted, nothing sent\", or after the summary of what was\n" +
			"written.\n\n" +
			"kcat's and rpk's short flags work where they mean the same: -t topic, -p\n" +
			"partition, -K key separator. -k is not a record key: --key is the TLS client\n" +
			"key (mTLS), as in curl.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f.partitioned = !cmd.Flags().Changed("partition")
			return missingTopicHint(runProduce(cmd.Context(), cmd.InOrStdin(), cmd.OutOrStdout(), cmd.ErrOrStderr(), f))
		},
	}
	fl := cmd.Flags()
	fl.StringVarP(&f.topic, "topic", "t", "", "topic to produce to (required)")
	fl.Int32VarP(&f.partition, "partition", "p", 0, "partition to produce every record to (default: Kafka's default partitioner)")
	fl.StringVarP(&f.keySeparator, "key-separator", "K", "", "split each line into key and value at the first occurrence of this string (kcat's -K)")
	fl.StringVarP(&f.output, "output", "o", "text", "text (a summary on stderr) or json (also what was written, as one JSON object on stdout)")
	fl.StringVar(&f.capability, "capability", "", "capability with the produce op for TOPIC/PARTITION ($CAPGATE_CAPABILITY)")
	fl.StringVar(&f.credential, "credential", "", "client credential allowed to produce to TOPIC ($CAPGATE_CREDENTIAL); prefer --credential-file")
	fl.StringVar(&f.credFile, "credential-file", "", "file holding a client credential allowed to produce to TOPIC")
	fl.StringVar(&f.token, "token", "", "admin token to mint a produce capability with ($CAPGATE_ADMIN_TOKEN)")
	fl.StringVar(&f.tokenFile, "token-file", "", "file holding the admin token, or credentials.json (or .env) from capgate dev")
	f.endpoints.register(cmd)
	fl.DurationVar(&f.ttl, "capability-ttl", 5*time.Minute, "lifetime of a minted capability (renewed while producing; at most the coordinator's max_lease)")
	fl.IntVar(&f.batchRecords, "batch-records", 500, "most records sent in one request")
	fl.IntVar(&f.batchBytes, "batch-bytes", 1<<20, "most key and value bytes sent in one request")
	cmd.MarkFlagRequired("topic")
	return cmd
}

// capabilitySource yields the capability to produce to one partition
// with, minting a new one through the admin API when the minted one is
// about to expire.
type capabilitySource struct {
	fixed   string
	admin   *adminClient
	request coordinator.SharedGrantRequest
	current string
	expires time.Time
	// partitions is the topic's partition count from the last mint (0:
	// unknown).
	partitions int32
}

// capabilities holds the capability source of every partition written,
// or the one bearer of every partition: a capability (--partition's) or
// a client credential (every partition of the topic).
type capabilities struct {
	fixed      string
	credential bool // fixed is a client credential
	admin      *adminClient
	f          *produceFlags
	parts      map[int32]*capabilitySource
}

func (f *produceFlags) capabilities() (*capabilities, error) {
	flagged := f.capability != "" || f.credential != "" || f.credFile != "" || f.token != "" || f.tokenFile != ""
	switch {
	case f.capability != "" || !flagged && os.Getenv("CAPGATE_CAPABILITY") != "":
		return f.fixedBearer(cmp.Or(f.capability, os.Getenv("CAPGATE_CAPABILITY")), false)
	case f.credential != "" || f.credFile != "":
		return f.fixedBearer("", true)
	case !flagged && os.Getenv("CAPGATE_ADMIN_TOKEN") == "" && os.Getenv("CAPGATE_CREDENTIAL") != "":
		return f.fixedBearer(os.Getenv("CAPGATE_CREDENTIAL"), true)
	}
	token, err := secretFrom(f.token, f.tokenFile, "CAPGATE_ADMIN_TOKEN", "admin_token")
	if err != nil {
		return nil, fmt.Errorf("nothing to produce with: pass a client credential allowed to produce (--credential-file, --credential or CAPGATE_CREDENTIAL), a capability (--capability or CAPGATE_CAPABILITY), or an admin token to mint capabilities: --token-file (credentials.json from capgate dev works), --token or CAPGATE_ADMIN_TOKEN%s", devCredentialsHere("--token-file"))
	}
	hc, err := f.endpoints.tls.httpClient(30 * time.Second)
	if err != nil {
		return nil, err
	}
	// The same client as `capgate admin`: a replica list, not_leader followed.
	admin, err := newAdminClient(f.endpoints.coordinator, token, hc)
	if err != nil {
		return nil, err
	}
	return &capabilities{admin: admin, f: f, parts: map[int32]*capabilitySource{}}, nil
}

// fixedBearer is the one bearer of every produce: a capability, or a
// client credential (bearer, else --credential / --credential-file).
// A capability needs --partition (it covers one); a credential without
// it writes through the gateway's topic route, which places the records.
func (f *produceFlags) fixedBearer(bearer string, credential bool) (*capabilities, error) {
	if !credential {
		if f.partitioned {
			return nil, usageErrorf("a capability covers one partition: pass --partition, or an admin token (--token-file) so one is minted for each partition the records go to")
		}
		return &capabilities{fixed: bearer, f: f}, nil
	}
	if bearer == "" {
		var err error
		if bearer, err = secretFrom(f.credential, f.credFile, "CAPGATE_CREDENTIAL", "client_credential"); err != nil {
			return nil, fmt.Errorf("client credential: %w", err)
		}
	}
	return &capabilities{fixed: bearer, credential: true, f: f}, nil
}

// of returns partition's capability source.
func (c *capabilities) of(partition int32) *capabilitySource {
	if c.fixed != "" {
		return &capabilitySource{fixed: c.fixed}
	}
	s := c.parts[partition]
	if s == nil {
		s = &capabilitySource{
			admin:   c.admin,
			request: coordinator.SharedGrantRequest{Topic: c.f.topic, Partition: partition, Ops: []string{"produce"}, TTLMs: c.f.ttl.Milliseconds(), Holder: "capgate-produce"},
		}
		c.parts[partition] = s
	}
	return s
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
		return "", fmt.Errorf("produce: mint capability for %s/%d: %w", s.request.Topic, s.request.Partition, err)
	}
	expires, err := time.Parse(time.RFC3339, resp.ExpiresAt)
	if err != nil {
		return "", fmt.Errorf("produce: mint capability: expires_at %q: %w", resp.ExpiresAt, err)
	}
	s.current, s.expires, s.partitions = resp.Capability, expires, resp.Partitions
	return s.current, nil
}

// producer writes batches to partitions and counts what it wrote.
type producer struct {
	f     *produceFlags
	caps  *capabilities
	prod  *client.Producer
	place *client.Partitioner // keyed records; nil: every record to --partition, or placed by the gateway (topicWide)
	// sticky is the partition of the next batch's keyless records: a
	// batch's keyless records are one write to one partition, the next
	// batch's to the next partition (Kafka's sticky partitioner, KIP-480).
	sticky int32
	// topicWide: a credential without --partition; the gateway places
	// the records (Producer.ProduceTopic).
	topicWide bool
	counts    map[int32]*written
	sending   bool // a Produce is unanswered (interrupted)
}

// written is what went to one partition.
type written struct {
	count       int
	first, last int64
}

func runProduce(ctx context.Context, stdin io.Reader, stdout, stderr io.Writer, f *produceFlags) error {
	if f.output != "text" && f.output != "json" {
		return usageErrorf("--output: want text or json, got %q", f.output)
	}
	if f.batchRecords < 1 || f.batchBytes < 1 {
		return usageErrorf("--batch-records and --batch-bytes: must be >= 1, got %d and %d", f.batchRecords, f.batchBytes)
	}
	// A partition below 0 went out and came back 400 (exit 1), a topic
	// no Kafka topic can be as a 404 from the mint (newuser5): usage
	// errors, as the admin commands' TOPIC and PARTITION.
	if !f.partitioned && f.partition < 0 {
		return usageErrorf("--partition %d: want a partition ≥ 0", f.partition)
	}
	if err := topicArg(f.topic); err != nil {
		return fmt.Errorf("--topic: %w", err)
	}
	if f.endpoints.tls.key != "" && f.endpoints.tls.cert == "" {
		// kcat's -k and -K give records keys; ours is the TLS key.
		return fmt.Errorf("--key %q without --cert: --key is the PEM private key of a client certificate (mTLS); "+
			"to give records keys, split each line with --key-separator", f.endpoints.tls.key)
	}
	caps, err := f.capabilities()
	if err != nil {
		return err
	}
	if caps.admin != nil {
		caps.admin.notice = stderr
	}
	p := &producer{f: f, caps: caps, counts: map[int32]*written{}, topicWide: caps.credential && f.partitioned}
	first := f.partition
	if f.partitioned && !p.topicWide {
		first = 0 // its grant tells the partition count
	}
	capability, err := caps.of(first).get(ctx)
	if err != nil {
		return err
	}
	if f.partitioned && !p.topicWide {
		n := caps.of(0).partitions
		if n < 1 {
			return fmt.Errorf("produce: the coordinator does not know %s's partition count: pass --partition", f.topic)
		}
		if p.place, err = client.NewPartitioner(n); err != nil {
			return err
		}
		p.sticky = rand.Int32N(n) // as Kafka's: not every run's first batch to partition 0
	}
	newProducer := client.NewProducer
	if caps.credential {
		newProducer = client.NewCredentialProducer
	}
	if p.prod, err = newProducer(f.endpoints.gateways, capability, client.WithTLS(f.endpoints.tls.files())); err != nil {
		return err
	}
	defer p.prod.Close()
	lines := readLines(ctx, stdin)
	for {
		batch, readErr := nextBatch(ctx, lines, f)
		if len(batch) > 0 { // stdin's end arrives alone after the last line typed: nothing to send
			if err := p.send(ctx, batch); err != nil {
				return p.ended(ctx, stdout, stderr, err)
			}
		}
		if readErr != nil {
			if errors.Is(readErr, io.EOF) {
				break
			}
			return p.ended(ctx, stdout, stderr, fmt.Errorf("produce: %w", readErr))
		}
	}
	return p.summary(stdout, stderr)
}

// summary says what was written: one line per partition on stderr, and
// with -o json the JSON object on stdout.
func (p *producer) summary(stdout, stderr io.Writer) error {
	p.report(stderr)
	if p.f.output == "json" {
		return p.writeJSON(stdout)
	}
	return nil
}

// send writes batch, split by partition (in order within each): keyed
// records where Kafka's default partitioner puts them, keyless ones all
// to one partition, the next batch's to the next.
func (p *producer) send(ctx context.Context, batch []client.Record) error {
	if p.topicWide {
		return p.sendTopic(ctx, batch)
	}
	byPartition := map[int32][]client.Record{}
	var order []int32
	keyless := false
	for i := range batch {
		part := p.f.partition
		switch {
		case p.place == nil:
		case batch[i].Key != nil:
			part = p.place.Partition(batch[i].Key)
		default:
			part, keyless = p.sticky, true
		}
		if _, ok := byPartition[part]; !ok {
			order = append(order, part)
		}
		byPartition[part] = append(byPartition[part], batch[i])
	}
	for _, part := range order {
		records := byPartition[part]
		capability, err := p.caps.of(part).get(ctx)
		if err != nil {
			return err
		}
		p.prod.SetCapability(capability)
		p.sending = true // until it is answered: an interrupt now may or may not have written it
		base, err := p.prod.Produce(ctx, p.f.topic, part, records)
		if err != nil {
			op := fmt.Sprintf("produce %s/%d", p.f.topic, part)
			return fmt.Errorf("%s after %s: %w", op, recordCount(p.total()), withoutOp(p.hint(ctx, err), op))
		}
		p.sending = false
		p.add(part, base, base+int64(len(records))-1, len(records))
	}
	if keyless {
		p.sticky = (p.sticky + 1) % p.place.Partitions()
	}
	return nil
}

// produceHint is err, a failed produce, with what to do when no gateway
// answered it — nothing listens at a --gateways URL, or it is a Kafka
// port: "connection refused" / "connection reset by peer" bare, where
// consume named the flag to fix (newuser9) — and unchanged when it says
// so already (a scheme mismatch) or a gateway answered.
func produceHint(ctx context.Context, err error) error {
	if errors.As(err, new(*client.SchemeError)) {
		return err
	}
	return gatewayHint(ctx, err)
}

// hint is produceHint, and for a bearer the gateway refused as expired
// what to pass instead: it said "token expired: exp …, 4m13s ago" and no
// more, where consume says to use a fresh credential (newuser14). A
// capability the CLI minted with an admin token is minted again before
// it runs out, so only one the user passed expires here.
func (p *producer) hint(ctx context.Context, err error) error {
	var ce *client.Error
	if !errors.As(err, &ce) || ce.Code != api.CodeTokenExpired || p.caps.admin != nil {
		return produceHint(ctx, err)
	}
	if p.caps.credential {
		return fmt.Errorf("%w: the client credential expired; pass a fresh one (capgate admin client-credential --ops consume,produce --topics %s mints one, --ttl its lifetime)", err, p.f.topic)
	}
	return fmt.Errorf("%w: the capability expired; pass a fresh one, or an admin token (--token-file: capgate dev's credentials.json) so a capability is minted for each partition written, and again before it runs out", err)
}

// sendTopic writes batch through the gateway's topic route, which places
// each record as Kafka's default partitioner does. When a partition's
// write failed, the partitions the gateway reports written are counted.
func (p *producer) sendTopic(ctx context.Context, batch []client.Record) error {
	p.sending = true // until it is answered: an interrupt now may or may not have written it
	parts, err := p.prod.ProduceTopic(ctx, p.f.topic, batch)
	if err != nil {
		for _, w := range partitionsWritten(err) {
			p.add(w.Partition, w.BaseOffset, w.LastOffset, w.Count)
		}
		op := "produce " + p.f.topic
		return fmt.Errorf("%s after %s: %w", op, recordCount(p.total()), withoutOp(p.hint(ctx, err), op))
	}
	p.sending = false
	for _, w := range parts {
		p.add(w.Partition, w.BaseOffset, w.LastOffset, w.Count)
	}
	return nil
}

// partitionsWritten reads the partitions a failed topic produce wrote
// from its error's details.partitions (none when it has none).
func partitionsWritten(err error) []client.PartitionProduced {
	var ce *client.Error
	if !errors.As(err, &ce) {
		return nil
	}
	list, _ := ce.Details["partitions"].([]any)
	var out []client.PartitionProduced
	for _, item := range list {
		m, _ := item.(map[string]any)
		if written, _ := m["written"].(bool); !written {
			continue
		}
		part, _ := m["partition"].(float64)
		base, _ := m["base_offset"].(float64)
		last, _ := m["last_offset"].(float64)
		count, _ := m["count"].(float64)
		out = append(out, client.PartitionProduced{Partition: int32(part), BaseOffset: int64(base), LastOffset: int64(last), Count: int(count)})
	}
	return out
}

// add counts count records written to part at offsets base..last.
func (p *producer) add(part int32, base, last int64, count int) {
	w := p.counts[part]
	if w == nil {
		w = &written{first: base}
		p.counts[part] = w
	}
	w.count += count
	w.last = last
}

func (p *producer) total() int {
	n := 0
	for _, w := range p.counts {
		n += w.count
	}
	return n
}

// report prints one line per partition written:
// "produced N records to T/P (offsets A..B)" ("1 record … (offset A)").
func (p *producer) report(stderr io.Writer) {
	if len(p.counts) == 0 {
		part := strconv.Itoa(int(p.f.partition))
		if p.f.partitioned {
			part = "*"
		}
		fmt.Fprintf(stderr, "produced 0 records to %s/%s\n", p.f.topic, part)
		return
	}
	for _, part := range slices.Sorted(maps.Keys(p.counts)) {
		w := p.counts[part]
		if w.count == 1 {
			fmt.Fprintf(stderr, "produced 1 record to %s/%d (offset %d)\n", p.f.topic, part, w.first)
			continue
		}
		fmt.Fprintf(stderr, "produced %d records to %s/%d (offsets %d..%d)\n", w.count, p.f.topic, part, w.first, w.last)
	}
}

// line is one line of stdin, or the error that ended reading.
type line struct {
	text []byte
	err  error
}

// stdinLines reads stdin in a goroutine, so lines already typed can be
// sent while the next is awaited. It hands the lines over as they
// arrived: a line and every complete line read with it (already in the
// read buffer, no further read of stdin) are one chunk, so what arrives
// together is batched together whatever the goroutines' scheduling. One
// line at a time over a channel, the sender could drain the channel
// faster than the reader filled it and send a pipe's lines in batches
// of a few (a keyless run's placement and its request count depended on
// it).
type stdinLines struct {
	chunks  <-chan []line
	pending []line // of the last chunk taken, not yet batched
}

// readLines starts reading r.
func readLines(ctx context.Context, r io.Reader) *stdinLines {
	out := make(chan []line, 16) // at most 16 read buffers (64 KiB each) ahead
	go func() {
		defer close(out)
		br := bufio.NewReaderSize(r, 64<<10)
		for {
			chunk, err := readChunk(br)
			select {
			case out <- chunk:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	}()
	return &stdinLines{chunks: out}
}

// readChunk reads a line, then the complete lines already buffered; the
// error that ended reading is the chunk's last element.
func readChunk(br *bufio.Reader) ([]line, error) {
	var chunk []line
	for {
		b, err := br.ReadBytes('\n')
		b = bytes.TrimSuffix(bytes.TrimSuffix(b, []byte("\n")), []byte("\r"))
		if len(b) > 0 || err == nil {
			chunk = append(chunk, line{text: b})
		}
		if err != nil {
			return append(chunk, line{err: err}), err
		}
		buffered, _ := br.Peek(br.Buffered())
		if bytes.IndexByte(buffered, '\n') < 0 {
			return chunk, nil
		}
	}
}

// nextBatch waits for one line, then takes the lines already read, up to
// the batch bounds. The error is io.EOF at the end of stdin; the batch
// then holds the lines before it, and may be empty.
func nextBatch(ctx context.Context, lines *stdinLines, f *produceFlags) ([]client.Record, error) {
	if len(lines.pending) == 0 {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case chunk, ok := <-lines.chunks:
			if !ok {
				return nil, io.EOF
			}
			lines.pending = chunk
		}
	}
	var batch []client.Record
	size := 0
	for {
		for len(lines.pending) > 0 && len(batch) < f.batchRecords && size < f.batchBytes {
			l := lines.pending[0]
			lines.pending = lines.pending[1:]
			if l.err != nil {
				return batch, l.err
			}
			rec := client.Record{Value: l.text}
			if f.keySeparator != "" {
				if k, v, ok := bytes.Cut(l.text, []byte(f.keySeparator)); ok {
					rec.Key, rec.Value = k, v
				}
			}
			batch = append(batch, rec)
			size += len(rec.Key) + len(rec.Value)
		}
		if len(batch) >= f.batchRecords || size >= f.batchBytes {
			return batch, nil
		}
		select {
		case chunk, ok := <-lines.chunks:
			if !ok {
				return batch, io.EOF
			}
			lines.pending = chunk
		default:
			return batch, nil
		}
	}
}
