package harness

import (
	"net/http"
	"net/url"
	"slices"
	"sync"
	"time"

	"github.com/capgate/capgate/coordinator"
)

// observer reads the coordinator's admin API every period — the gateways'
// acknowledged seqs, then each observed group's partitions — into the Log.
// Reading the gateways first matters: a partition still at epoch e in the
// same round means its next fence had not been appended when the seq was
// read. Failed reads (coordinator down) are skipped.
type observer struct {
	c      *Cluster
	period time.Duration
	stopc  chan struct{}
	done   chan struct{}

	mu     sync.Mutex
	groups []string
}

func startObserver(c *Cluster, period time.Duration) *observer {
	o := &observer{c: c, period: period, stopc: make(chan struct{}), done: make(chan struct{})}
	go o.run()
	return o
}

func (o *observer) addGroup(g string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if !slices.Contains(o.groups, g) {
		o.groups = append(o.groups, g)
	}
}

func (o *observer) stop() {
	close(o.stopc)
	<-o.done
}

func (o *observer) run() {
	defer close(o.done)
	tick := time.NewTicker(o.period)
	defer tick.Stop()
	for {
		select {
		case <-o.stopc:
			return
		case <-tick.C:
		}
		o.once()
	}
}

func (o *observer) once() {
	c := o.c
	var gws coordinator.GatewaysResponse
	at := Now()
	if status, _, err := c.Admin(http.MethodGet, "/v1/admin/gateways", nil, &gws); err == nil && status == http.StatusOK {
		for _, g := range gws.Gateways {
			c.Log.AddGatewayState(GatewayState{Gateway: g.ID, Acked: g.Acked, Seq: gws.Seq, Silent: g.Silent, At: at})
		}
	}
	o.mu.Lock()
	groups := slices.Clone(o.groups)
	o.mu.Unlock()
	for _, g := range groups {
		var d coordinator.GroupDescription
		at := Now()
		if status, _, err := c.Admin(http.MethodGet, "/v1/admin/groups/"+url.PathEscape(g), nil, &d); err != nil || status != http.StatusOK {
			continue
		}
		for _, p := range d.Partitions {
			committed := int64(-1)
			if p.Committed != nil {
				committed = *p.Committed
			}
			c.Log.AddPartitionState(PartitionState{Key: PartitionKey{Group: g, Topic: p.Topic, Partition: p.Partition},
				Epoch: p.Epoch, State: p.State, Owner: p.Owner, OwnerEpoch: p.OwnerEpoch, Committed: committed, At: at})
		}
	}
}
