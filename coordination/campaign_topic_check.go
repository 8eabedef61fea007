package coordination

import (
	"context"
	"reflect"
	"sync"
	"time"
)

// This file holds the campaigns' shared check of the state topic: over one
// [ExtendedTransport], a check that passed answers for the campaigns of the
// same topic, partition count and lease that start within
// stateTopicCheckMemory of it, and campaigns that start together share one
// check in flight, so a process that acquires many roles checks the topic
// once a minute, not once a role. A call of CheckStateTopic itself always
// checks anew.

// stateTopicCheckMemory is how long a campaign's check of the state topic
// that passed answers for the later campaigns.
const stateTopicCheckMemory = time.Minute

// stateTopicCheckKey is what a check depends on: the transport, the topic
// and the count that the options name, and the lease that the transport's
// warning compares.
type stateTopicCheckKey struct {
	transport    Transport
	topic        string
	partitions   int
	lease, renew time.Duration
}

// stateTopicChecks remembers the campaigns' checks that passed, and the
// check in flight of each key. An entry is forgotten once it is older than
// stateTopicCheckMemory (at the next check of any key), so a closed
// transport stays in it a minute at most.
var stateTopicChecks struct {
	mu     sync.Mutex
	passed map[stateTopicCheckKey]time.Time     // when the check passed
	flight map[stateTopicCheckKey]chan struct{} // closed when the check in flight ends
}

// checkStateTopicForCampaign is extended.CheckStateTopic as a campaign
// calls it (newCampaign): a check that passed within stateTopicCheckMemory
// for the same key is not sent again, and campaigns that start together
// share one check in flight. A check that did not pass is never
// remembered: every campaign then checks again, and the one that stops on
// ErrMisconfigured stops as before. A transport value that == cannot
// compare is checked every time.
func checkStateTopicForCampaign(ctx context.Context, transport Transport, extended ExtendedTransport, s *settings, options []Option) error {
	if !reflect.ValueOf(transport).Comparable() {
		return extended.CheckStateTopic(ctx, options...)
	}
	key := stateTopicCheckKey{transport: transport, topic: s.topic, partitions: s.partitions, lease: s.lease.duration, renew: s.lease.renewInterval}
	c := &stateTopicChecks
	for {
		c.mu.Lock()
		now := time.Now()
		for k, at := range c.passed {
			if now.Sub(at) >= stateTopicCheckMemory {
				delete(c.passed, k)
			}
		}
		if _, ok := c.passed[key]; ok {
			c.mu.Unlock()
			return nil
		}
		wait, inFlight := c.flight[key]
		if !inFlight {
			if c.flight == nil {
				c.flight = make(map[stateTopicCheckKey]chan struct{})
				c.passed = make(map[stateTopicCheckKey]time.Time)
			}
			done := make(chan struct{})
			c.flight[key] = done
			c.mu.Unlock()
			err := extended.CheckStateTopic(ctx, options...)
			c.mu.Lock()
			delete(c.flight, key)
			if err == nil {
				c.passed[key] = time.Now()
			}
			c.mu.Unlock()
			close(done)
			return err
		}
		c.mu.Unlock()
		select {
		case <-wait:
			// Passed: the loop answers from memory. Failed: this
			// campaign checks for itself.
			c.mu.Lock()
			_, passed := c.passed[key]
			c.mu.Unlock()
			if !passed {
				return extended.CheckStateTopic(ctx, options...)
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}
