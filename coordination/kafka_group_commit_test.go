package coordination_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The group commit of Leadership.Write (issue 12, item 1) over
// KafkaTransport, on kfake and on the real broker: concurrent calls share
// transactions, each call's records stay together and in order, no call is
// lost or repeated, and a call with a record that the broker refuses fails
// alone. The in-memory tests (group_commit_test.go) pin every outcome of a
// shared transaction; these check that the producer of a real client
// carries it. The helpers of this file carry the kg prefix.

func TestKafkaGroupCommitFake(t *testing.T) {
	t.Parallel()
	kgConcurrentWriters(t, kafkatest.Fake(t))
}

func TestKafkaGroupCommitKafka(t *testing.T) {
	kgConcurrentWriters(t, kafkatest.Kafka(t))
}

// kgTxns counts the EndTxn and AddPartitionsToTxn requests of a transport's
// clients.
type kgTxns struct{ endTxns, addPartitions atomic.Int64 }

func (c *kgTxns) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if err != nil {
		return
	}
	switch key {
	case 26:
		c.endTxns.Add(1)
	case 24:
		c.addPartitions.Add(1)
	}
}

// kgConcurrentWriters: 16 goroutines of one leader write 20 calls each, two
// records a call, at once. Every call returns nil; read back
// read_committed, the command topic holds every record once, the two
// records of each call next to each other, and each goroutine's calls in
// their order; the calls took fewer transactions than there were calls.
// Then one call of a volley of four writes to a topic that does not exist:
// it fails without ending the leadership, and the other three land.
func kgConcurrentWriters(t *testing.T, c *kafkatest.Cluster) {
	e := klNewEnv(t, c, klConfig(t, 6*time.Second, 2*time.Second, time.Second))
	ctx := ktContext(t)
	commands := c.CreateTopic(t, "coord-group-commands", 1, nil)
	role := ktRole(t, "group-commit")
	txns := &kgTxns{}
	holder := e.campaign(t, e.transport(t, kgo.WithHooks(txns)), role, "node-1").await(t, 30*time.Second)

	const writers, calls = 16, 20
	endTxns := txns.endTxns.Load()
	var wg sync.WaitGroup
	failures := make(chan error, writers*calls)
	start := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			<-start
			for i := range calls {
				err := holder.Write(ctx,
					coordination.GuardedRecord{Topic: commands, Value: fmt.Appendf(nil, "%d/%d/0", w, i)},
					coordination.GuardedRecord{Topic: commands, Value: fmt.Appendf(nil, "%d/%d/1", w, i)})
				if err != nil {
					failures <- fmt.Errorf("writer %d, call %d: %w", w, i, err)
					return
				}
			}
		})
	}
	began := time.Now()
	close(start)
	wg.Wait()
	took := time.Since(began)
	close(failures)
	for err := range failures {
		t.Fatal(err)
	}
	transactions := txns.endTxns.Load() - endTxns
	t.Logf("%d calls of %d writers in %d transactions (%.1f calls each), %v", writers*calls, writers, transactions,
		float64(writers*calls)/float64(max(transactions, 1)), took)
	if transactions >= writers*calls {
		t.Fatalf("%d calls took %d transactions: no call shared one", writers*calls, transactions)
	}
	klAlive(t, "node-1", holder)

	last := fmt.Sprintf("%d/%d/1", writers-1, calls-1)
	got := klReadCommands(t, c, commands, last)
	next := make([]int, writers)
	for i := 0; i < len(got); i++ {
		var w, n, part int
		if _, err := fmt.Sscanf(string(got[i].Value), "%d/%d/%d", &w, &n, &part); err != nil || w < 0 || w >= writers {
			t.Fatalf("record %d = %q: not a command of the test", i, got[i].Value)
		}
		if n != next[w] || part != 0 {
			t.Fatalf("record %d = %q; want %d/%d/0: a call lost, repeated or out of order", i, got[i].Value, w, next[w])
		}
		if i+1 >= len(got) || string(got[i+1].Value) != fmt.Sprintf("%d/%d/1", w, n) {
			t.Fatalf("record %d = %q is not followed by the second record of its call", i, got[i].Value)
		}
		next[w]++
		i++
	}
	for w, n := range next {
		if n != calls {
			t.Fatalf("writer %d: %d calls in the command topic, want %d", w, n, calls)
		}
	}

	// A volley of four calls, one of them to a missing topic, while a
	// large write holds the producer, so that they queue together.
	missing := kafkatest.TopicName("coord-group-no-such-topic")
	big := make([]coordination.GuardedRecord, 2000)
	for i := range big {
		big[i] = coordination.GuardedRecord{Topic: commands, Value: make([]byte, 1000)}
	}
	endTxns, adds := txns.endTxns.Load(), txns.addPartitions.Load()
	bigDone := make(chan error, 1)
	go func() { bigDone <- holder.Write(ctx, big...) }()
	time.Sleep(time.Millisecond)
	volley := []string{commands, missing, commands, commands}
	outcomes := make([]chan error, len(volley))
	for i, topic := range volley {
		outcomes[i] = make(chan error, 1)
		go func() {
			write, cancel := context.WithTimeout(ctx, 20*time.Second)
			defer cancel()
			outcomes[i] <- holder.Write(write, coordination.GuardedRecord{Topic: topic, Value: fmt.Appendf(nil, "volley/%d", i)})
		}()
	}
	if err := <-bigDone; err != nil {
		t.Fatalf("the large write: %v", err)
	}
	for i, topic := range volley {
		err := <-outcomes[i]
		switch {
		case topic == missing && err == nil:
			t.Fatalf("the volley's write to the missing topic %s succeeded", missing)
		case topic == missing && (errors.Is(err, coordination.ErrFenced) || errors.Is(err, coordination.ErrProducerLost)):
			t.Fatalf("the volley's write to a missing topic = %v; want a failed write, not the end of the leadership", err)
		case topic == missing:
			t.Logf("the volley's write to the missing topic: %v", err)
		case err != nil:
			t.Fatalf("volley call %d, beside a call to a missing topic: %v", i, err)
		}
	}
	t.Logf("the large write and the volley took %d transactions (%d AddPartitionsToTxn)",
		txns.endTxns.Load()-endTxns, txns.addPartitions.Load()-adds)
	klAlive(t, "node-1", holder)
	got = klReadCommands(t, c, commands, "volley/3")
	seen := make(map[string]int)
	for _, record := range got {
		seen[string(record.Value)]++
	}
	for _, want := range []string{"volley/0", "volley/2", "volley/3"} {
		if seen[want] != 1 {
			t.Fatalf("%s is in the command topic %d times; want once", want, seen[want])
		}
	}
	if err := holder.Renew(ctx); err != nil {
		t.Fatalf("a renewal after the volley: %v", err)
	}
}
