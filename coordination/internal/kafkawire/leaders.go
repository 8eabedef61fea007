package kafkawire

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
)

// This file holds the cache of partition leaders of the transactional
// writes: a raw Produce goes to the leader of its partition, so the wire
// keeps the leaders of the topics it writes, loaded with one Metadata
// request per topic and loaded again when a leader refuses a batch.

// leaderCache maps the partitions of the topics that a wire writes to
// their leaders. It is safe for concurrent use; concurrent loads of one
// topic share one Metadata request.
type leaderCache struct {
	client *kgo.Client

	mu     sync.Mutex
	topics map[string]*topicLeaders
}

// topicLeaders is the leader of every partition of one topic, or the load
// in flight.
type topicLeaders struct {
	loading  chan struct{} // closed when the load in flight ends; nil when loaded
	leaders  []int32       // by partition; -1 for a partition without a leader
	err      error         // the error of the latest load
	loadedAt time.Time
}

// leaderStaleAfter is the age past which a leader of the cache is loaded
// again before a write that asks for a fresh one: a partition whose leader
// refused a batch reloads its topic at most this often.
const leaderStaleAfter = 100 * time.Millisecond

// unknownTopicLoads is how often the wire loads the metadata of a topic
// that the broker does not know before a write to it fails: a topic
// created a moment ago may not have reached the broker's metadata yet.
// franz-go's producer also loads an unknown topic 4 times by default.
const unknownTopicLoads = 4

func newLeaderCache(client *kgo.Client) *leaderCache {
	return &leaderCache{client: client, topics: make(map[string]*topicLeaders)}
}

// leader returns the leader of a partition. With fresh set it loads the
// topic again unless its leaders were loaded less than leaderStaleAfter
// ago. It returns an error that wraps the broker's code for a topic that
// does not exist or that the member may not describe, for a partition
// outside the topic, and LEADER_NOT_AVAILABLE for a partition without a
// leader.
func (c *leaderCache) leader(ctx context.Context, tp Partition, fresh bool) (int32, error) {
	for loads := 0; ; loads++ {
		leaders, err := c.load(ctx, tp.Topic, fresh || loads > 0)
		switch {
		case err != nil && Classify(PathMetadata, err) == Missing && loads+1 < unknownTopicLoads && ctx.Err() == nil:
			select {
			case <-ctx.Done():
			case <-time.After(100 * time.Millisecond):
			}
			continue
		case err != nil:
			return -1, err
		case int(tp.Partition) >= len(leaders):
			return -1, fmt.Errorf("topic %s has %d partitions, so partition %d does not exist: %w",
				tp.Topic, len(leaders), tp.Partition, errMissing)
		case leaders[tp.Partition] < 0:
			return -1, fmt.Errorf("partition %s has no leader: %w", tp, errLeaderless)
		}
		return leaders[tp.Partition], nil
	}
}

// load returns the leaders of topic, loading them when the cache has none,
// or when reload is set and they are older than leaderStaleAfter.
func (c *leaderCache) load(ctx context.Context, topic string, reload bool) ([]int32, error) {
	for {
		c.mu.Lock()
		entry := c.topics[topic]
		switch {
		case entry != nil && entry.loading != nil:
			loading := entry.loading
			c.mu.Unlock()
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-loading:
			}
			continue
		case entry != nil && entry.err == nil && (!reload || time.Since(entry.loadedAt) < leaderStaleAfter):
			leaders := entry.leaders
			c.mu.Unlock()
			return leaders, nil
		}
		loading := make(chan struct{})
		c.topics[topic] = &topicLeaders{loading: loading}
		c.mu.Unlock()

		leaders, err := c.request(ctx, topic)
		c.mu.Lock()
		c.topics[topic] = &topicLeaders{leaders: leaders, err: err, loadedAt: time.Now()}
		c.mu.Unlock()
		close(loading)
		return leaders, err
	}
}

// request loads the leaders of one topic with a Metadata request.
func (c *leaderCache) request(ctx context.Context, topic string) ([]int32, error) {
	resp, err := requestMetadata(ctx, c.client, topic)
	if err != nil {
		return nil, err
	}
	for _, t := range resp.Topics {
		if t.Topic == nil || *t.Topic != topic {
			continue
		}
		if err := codeError(t.ErrorCode); err != nil {
			return nil, err
		}
		leaders := make([]int32, len(t.Partitions))
		for i := range leaders {
			leaders[i] = -1
		}
		for _, p := range t.Partitions {
			if p.Partition >= 0 && int(p.Partition) < len(leaders) {
				leaders[p.Partition] = p.Leader
			}
		}
		return leaders, nil
	}
	return nil, fmt.Errorf("the metadata response omits topic %s: %w", topic, errMissing)
}
