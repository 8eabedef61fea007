package coordination_test

import (
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// describeConfigsCounter counts the DescribeConfigs requests of a
// transport's clients: a check of the state topic sends one for the topic
// and one for a broker's broker.session.timeout.ms.
type describeConfigsCounter struct{ n atomic.Int64 }

func (c *describeConfigsCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, _ error) {
	if key == kmsg.DescribeConfigs.Int16() {
		c.n.Add(1)
	}
}

// ktCampaignsShareTheStateTopicCheck: the campaigns of one transport check
// the state topic once for the same topic, count and lease, whether they
// start together or one after the other; CheckStateTopic itself checks
// anew at every call; and a campaign configured for another count is
// still refused.
func ktCampaignsShareTheStateTopicCheck(t *testing.T, c *kafkatest.Cluster) {
	ctx := ktContext(t)
	counter := &describeConfigsCounter{}
	transport := ktTransport(t, c, kgo.WithHooks(counter))
	name, options := ktStateTopic(t, c, transport, 16)
	options = append(options, coordination.WithLeaseConfig(transport.LeaseConfig()))
	counter.n.Store(0)

	member := fxMember(t, "node-1")
	held := make([]*coordination.Leadership, 6)
	var wg sync.WaitGroup
	errs := make([]error, len(held))
	for i := range held[:3] { // together
		wg.Go(func() {
			held[i], errs[i] = coordination.AcquireLeadership(ctx, transport, ktRole(t, "shared-check"), member, options...)
		})
	}
	wg.Wait()
	for i := 3; i < len(held); i++ { // one after the other
		held[i], errs[i] = coordination.AcquireLeadership(ctx, transport, ktRole(t, "shared-check"), member, options...)
	}
	if err := errors.Join(errs...); err != nil {
		t.Fatalf("AcquireLeadership: %v", err)
	}
	for _, l := range held {
		defer func() { _ = l.Resign(ctx) }()
	}
	if n := counter.n.Load(); n == 0 || n > 2 {
		t.Fatalf("6 campaigns sent %d DescribeConfigs requests; want the 1 or 2 of one check", n)
	}

	before := counter.n.Load()
	if err := transport.CheckStateTopic(ctx, options...); err != nil {
		t.Fatalf("CheckStateTopic: %v", err)
	}
	if counter.n.Load() == before {
		t.Fatalf("CheckStateTopic answered from the campaigns' memory; want a check of its own")
	}

	_, err := coordination.AcquireLeadership(ctx, transport, ktRole(t, "shared-check"), member,
		coordination.WithTopic(name), coordination.WithPartitions(8), coordination.WithLeaseConfig(transport.LeaseConfig()))
	if !errors.Is(err, coordination.ErrMisconfigured) {
		t.Fatalf("AcquireLeadership with 8 partitions against 16 after the check of 16 passed = %v; want ErrMisconfigured", err)
	}
}
