package broker

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
)

// GroupOwner is what Kafka holds under a group name, as a writer that
// marks its commits (the offset mirror) must know it before it writes
// there: whether a native Kafka consumer group uses the name, and whose
// committed offsets the name holds.
type GroupOwner struct {
	// Native describes the native Kafka group of that name, "" when
	// there is none: a classic group that has (or had) members — a
	// protocol type, kept while it is empty — or a KIP-848 consumer
	// group.
	Native string
	// Offsets counts the group's committed partitions; Foreign those
	// whose commit metadata is not the marker asked about, Example one
	// of them ("topic[p] metadata \"…\"", cut to 64 bytes of metadata).
	Offsets, Foreign int
	Example          string
}

// Owned reports whether the marker's writer may write the group: no
// native group, and every committed offset (if any) carries the marker.
// A name Kafka holds nothing under is owned: nothing can tell a native
// group that has not started yet (or whose offsets Kafka expired) from a
// free name, so a writer whose names others choose must keep out of the
// native groups' name space (the mirror's mirror_offsets_prefix).
func (o GroupOwner) Owned() bool { return o.Native == "" && o.Foreign == 0 }

// Reason says why the group is not the marker's writer's ("" when it is).
func (o GroupOwner) Reason() string {
	switch {
	case o.Native != "":
		return o.Native
	case o.Foreign > 0:
		return fmt.Sprintf("%d of its %d committed offsets were not written by this deployment (e.g. %s)", o.Foreign, o.Offsets, o.Example)
	}
	return ""
}

// exampleMetadataMax bounds the metadata GroupOwner.Example quotes.
const exampleMetadataMax = 64

// GroupOwner reads what Kafka holds under group, with three requests to
// its group coordinator: DescribeGroups (a classic group's protocol type,
// state and members), ConsumerGroupDescribe (a KIP-848 group; a Kafka
// too old to know the API has none) and an OffsetFetch of every committed
// offset, whose metadata is compared with marker. It decides nothing: a
// group can change right after it answered (Kafka itself refuses a simple
// commit while a consumer group of that name has members).
func (c *Client) GroupOwner(ctx context.Context, group, marker string) (GroupOwner, error) {
	bounded, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	adm := kadm.NewClient(c.kgo)
	var owner GroupOwner
	var err error
	if owner.Native, err = nativeGroup(bounded, adm, group); err != nil {
		return GroupOwner{}, c.boundedError(ctx, "describe group", err)
	}
	offsets, err := adm.FetchOffsets(bounded, group)
	if err != nil && !errors.Is(err, kerr.GroupIDNotFound) {
		return GroupOwner{}, c.boundedError(ctx, "fetch offsets", err)
	}
	topics := offsets.Sorted()
	for _, o := range topics {
		if o.Err != nil {
			return GroupOwner{}, wrapError("fetch offsets", fmt.Errorf("%s[%d]: %w", o.Topic, o.Partition, o.Err))
		}
		if o.At < 0 {
			continue // nothing committed
		}
		owner.Offsets++
		if o.Metadata == marker {
			continue
		}
		if owner.Foreign++; owner.Example == "" {
			meta := o.Metadata
			if len(meta) > exampleMetadataMax {
				meta = meta[:exampleMetadataMax] + "…"
			}
			owner.Example = fmt.Sprintf("%s[%d] metadata %q", o.Topic, o.Partition, meta)
		}
	}
	return owner, nil
}

// nativeGroup describes the native Kafka consumer group named group, ""
// when there is none: a group that simple commits alone created has no
// protocol type, no members and state Empty (or Dead / not found when
// nothing exists).
func nativeGroup(ctx context.Context, adm *kadm.Client, group string) (string, error) {
	described, err := adm.DescribeGroups(ctx, group)
	if err != nil {
		return "", err
	}
	if g, ok := described[group]; ok {
		switch {
		case g.Err != nil && !errors.Is(g.Err, kerr.GroupIDNotFound):
			return "", g.Err
		case g.Err == nil && (g.ProtocolType != "" || len(g.Members) > 0 || !slices.Contains([]string{"Empty", "Dead", ""}, g.State)):
			return fmt.Sprintf("a native Kafka consumer group (protocol type %q, state %s, %d members)", g.ProtocolType, g.State, len(g.Members)), nil
		}
	}
	consumers, err := adm.DescribeConsumerGroups(ctx, group)
	if err != nil {
		if brokerTooOld(err) {
			return "", nil // no KIP-848 group can exist there
		}
		return "", err
	}
	if g, ok := consumers[group]; ok {
		switch {
		case g.Err == nil:
			return fmt.Sprintf("a native Kafka consumer group (KIP-848, state %s, %d members)", g.State, len(g.Members)), nil
		case !errors.Is(g.Err, kerr.GroupIDNotFound):
			return "", g.Err
		}
	}
	return "", nil
}

// brokerTooOld reports kgo's refusal to send a request the broker said
// (ApiVersions) it does not know; kgo does not export that error.
func brokerTooOld(err error) bool {
	return err != nil && strings.Contains(err.Error(), "broker is too old")
}
