package broker

import "context"

// Topics returns every non-internal topic with its partition count, asking
// a broker (not the cache), and refreshes the cache with what it learns.
func (c *Client) Topics(ctx context.Context) (map[string]int32, error) {
	bounded, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	counts, err := c.meta.load(bounded, nil)
	if err != nil {
		return nil, c.boundedError(ctx, "metadata", err)
	}
	return counts, nil
}

// PartitionCount returns the partition count of topic, from the metadata
// cache when it is younger than MetadataMaxAge.
func (c *Client) PartitionCount(ctx context.Context, topic string) (int32, error) {
	bounded, cancel := context.WithTimeout(ctx, c.cfg.RequestTimeout)
	defer cancel()
	n, err := c.meta.partitionCount(bounded, topic)
	if err != nil {
		return 0, c.boundedError(ctx, "metadata", err)
	}
	return n, nil
}
