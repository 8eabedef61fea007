package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// findCoordinatorCounter counts the FindCoordinator requests.
type findCoordinatorCounter struct{ requests atomic.Int32 }

func (h *findCoordinatorCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.FindCoordinator.Int16() && err == nil {
		h.requests.Add(1)
	}
}

// TestKafkaConcurrentMintsShareTheCoordinatorLookups: mints of many ids at
// once look their coordinators up in a few FindCoordinator requests, not
// one for each id; each id gets its coordinator and mints; a lookup whose
// every caller gave up ends with them. On kfake and on the real broker.
func TestKafkaConcurrentMintsShareTheCoordinatorLookups(t *testing.T) {
	for _, c := range []*kafkatest.Cluster{kafkatest.Fake(t), kafkatest.Kafka(t)} {
		t.Run(c.Name, func(t *testing.T) {
			hook := new(findCoordinatorCounter)
			w, err := New(Config{Brokers: c.Brokers, Options: []kgo.Opt{kgo.WithHooks(hook)}, TxnTimeout: 10 * time.Second, RenewInterval: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()

			const ids = 40
			prefix := kafkatest.TopicName("shared-lookup")
			var wg sync.WaitGroup
			errs := make([]error, ids)
			for i := range ids {
				wg.Go(func() {
					_, errs[i] = w.Mint(ctx, fmt.Sprintf("%s-%d", prefix, i), "mint")
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("Mint: %v", err)
			}
			if n := hook.requests.Load(); n == 0 || n >= ids/2 {
				t.Fatalf("%d concurrent mints sent %d FindCoordinator requests; want a few", ids, n)
			}

			// A lookup whose caller gives up: the caller gets its
			// context's error, and nothing is left waiting.
			gone, stop := context.WithCancel(ctx)
			stop()
			if _, err := w.coords.node(gone, prefix+"-gone"); !errors.Is(err, context.Canceled) {
				t.Fatalf("node with an ended context = %v; want context.Canceled", err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for {
				w.coords.mu.Lock()
				left, sending := len(w.coords.lookups), w.coords.sending
				w.coords.mu.Unlock()
				if left == 0 && !sending {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d lookups left, sending %v, after their callers gave up", left, sending)
				}
				time.Sleep(10 * time.Millisecond)
			}
		})
	}
}

// A copy without an answer may land for as long as its node is the
// coordinator: another node's answer as the coordinator ends that, the
// same node's does not.
func TestUnansweredAtClearsOnAnotherCoordinatorOnly(t *testing.T) {
	var u unansweredAt
	if u.pending() {
		t.Fatal("a fresh request has a copy pending")
	}
	u.answeredBy(1)
	if u.pending() {
		t.Fatal("an answer marked a copy pending")
	}
	u.note(1)
	u.answeredBy(1)
	if !u.pending() {
		t.Fatal("node 1's own answer cleared its unanswered copy; a copy queued there may still land")
	}
	u.note(2)
	u.answeredBy(2)
	if !u.pending() {
		t.Fatal("node 2's answer cleared node 1's copy, though 2 was itself unanswered before")
	}
	u.answeredBy(3)
	if u.pending() {
		t.Fatal("node 3 answered as the coordinator, so nodes 1 and 2 no longer are; want nothing pending")
	}
}
