package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
)

// TestProduceRetriesWhatABrokerFaultLeavesUnanswered: the failures of a
// transactional Produce that the next round of the write may not see (the
// leader's broker died, so its connection cannot be dialled, or the
// Metadata request that looks up the new leader got no answer) keep the
// batch for the next round, while the write's context lasts; what no
// retry repairs fails the batch. Issue 9: on the 3-node cluster a kill -9
// of a state partition's leader ended a renewal's producer ("a batch got no
// answer") though the partition had a new leader seconds later.
func TestProduceRetriesWhatABrokerFaultLeavesUnanswered(t *testing.T) {
	dial := fmt.Errorf("unable to dial: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")})
	read := fmt.Errorf("read: %w", &net.OpError{Op: "read", Net: "tcp", Err: errors.New("connection reset by peer")})
	live := context.Background()
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	for _, c := range []struct {
		name      string
		ctx       context.Context
		err       error
		transient bool
	}{
		{"a dead broker's connection", live, dial, true},
		{"a connection reset", live, read, true},
		{"a leader that moved", live, kerr.NotLeaderForPartition, true},
		{"a topic that does not exist", live, fmt.Errorf("records: %w", kerr.UnknownTopicOrPartition), false},
		{"a refused topic", live, kerr.TopicAuthorizationFailed, false},
		{"a dead broker's connection after the context", ended, dial, false},
	} {
		if got := leaderLookupTransient(c.ctx, c.err); got != c.transient {
			t.Errorf("%s (%v): leaderLookupTransient = %v, want %v", c.name, c.err, got, c.transient)
		}
	}
	if !notDialled(dial) {
		t.Errorf("notDialled(%v) = false; a connection that was never dialled carried no batch", dial)
	}
	if notDialled(read) {
		t.Errorf("notDialled(%v) = true; the batch of a reset connection may have reached the leader", read)
	}
}
