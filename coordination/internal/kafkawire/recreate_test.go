package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The tests of a state topic deleted and created again under the reader
// (issue 28): the view starts over from the new log, and a partition that
// the new topic lacks fails its reads as Misconfigured.

// krRecreate deletes the topic and creates it again with partitions
// partitions, retrying the create while the cluster still deletes the old
// one (Apache Kafka deletes a topic in the background).
func krRecreate(t *testing.T, c *kafkatest.Cluster, topic string, partitions int) {
	t.Helper()
	admin := c.Admin(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if _, err := admin.DeleteTopic(ctx, topic); err != nil {
		t.Fatalf("delete topic %s: %v", topic, err)
	}
	for {
		resp, err := admin.CreateTopic(ctx, int32(partitions), int16(max(c.ReplicationFactor, 1)), map[string]*string{"cleanup.policy": new("compact")}, topic)
		if err == nil && resp.Err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("create topic %s again: %v, %v", topic, err, resp.Err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	c.WaitTopicReady(t, topic, partitions)
}

// krAppendAfterRecreate appends like krAppend to a topic that was just
// created again: the first append of a wire that produced to the old topic
// may fail with UNKNOWN_TOPIC_ID (franz-go keeps the old id until the
// wire purges it); the second must land.
func krAppendAfterRecreate(t *testing.T, ctx context.Context, writer *Wire, tp Partition, n int) string {
	t.Helper()
	key := fmt.Sprintf("key-%d", n)
	var errs []error
	for range 2 {
		err := writer.Append(ctx, Record{Partition: tp, Key: []byte(key), Value: []byte("value")})
		if err == nil {
			return key
		}
		errs = append(errs, err)
	}
	t.Fatalf("Append(%s, %s) to the topic created again failed twice: %v", tp, key, errs)
	return ""
}

func krEachCluster(t *testing.T, run func(t *testing.T, c *kafkatest.Cluster)) {
	t.Run("kfake", func(t *testing.T) { run(t, kafkatest.Fake(t)) })
	t.Run("kafka", func(t *testing.T) { run(t, kafkatest.Kafka(t)) })
}

// TestKafkaReaderStartsOverOnARecreatedTopic: the topic is deleted and
// created again while the reader follows a partition of it. The reader
// notices within a long poll and its lookup: Incarnation moves, the view
// holds the new log's records only, and none of the old one's.
func TestKafkaReaderStartsOverOnARecreatedTopic(t *testing.T) {
	krEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := krContext(t)
		topic := c.CreateTopic(t, "reader-recreated", 2, map[string]string{"cleanup.policy": "compact"})
		tp := Partition{Topic: topic, Partition: 1}
		writer := krWire(t, c, krLease)
		reader := krWire(t, c, krLease).Reader()
		for i := range 3 {
			krAppend(t, ctx, writer, tp, i)
		}
		records, next, err := reader.ReadFrom(ctx, tp, 0)
		if err != nil || len(records) != 3 {
			t.Fatalf("ReadFrom before = %d records, %v; want 3", len(records), err)
		}
		before := reader.Incarnation(tp)
		changed, stop := reader.Watch(tp)
		defer stop()

		krRecreate(t, c, topic, 2)
		// More records than the old log had: a view that went on from the
		// old log's next offset would miss the first of them, and keep the
		// old keys.
		fresh := []string{krAppendAfterRecreate(t, ctx, writer, tp, 100)}
		for i := 101; i < 105; i++ {
			fresh = append(fresh, krAppend(t, ctx, writer, tp, i))
		}
		deadline := time.Now().Add(10 * time.Second)
		for reader.Incarnation(tp) == before {
			if time.Now().After(deadline) {
				t.Fatalf("the reader did not notice the topic created again within 10 s")
			}
			select {
			case <-changed:
			case <-time.After(100 * time.Millisecond):
			}
		}
		// A current view serves the last stable offset of its latest long
		// poll: read until the view has caught up with the appends.
		var got []Record
		var n int64
		for {
			if got, n, err = reader.ReadFrom(ctx, tp, 0); err != nil {
				t.Fatalf("ReadFrom after: %v", err)
			}
			if n >= int64(len(fresh)) || time.Now().After(deadline) {
				break
			}
			time.Sleep(50 * time.Millisecond)
		}
		var keys []string
		for _, r := range got {
			keys = append(keys, string(r.Key))
		}
		if !slices.Equal(keys, fresh) || len(got) == 0 || got[0].Offset != 0 || n != int64(len(fresh)) {
			t.Fatalf("ReadFrom(0) after the topic was created again = %v, next %d; want only %v from offset 0, next %d", got, n, fresh, len(fresh))
		}
		if next >= int64(len(fresh)) {
			t.Fatalf("the old log's next offset %d; the test needs the new log to pass it", next)
		}
	})
}

// TestKafkaReaderPartitionGoneIsMisconfigured: the topic is created again
// with fewer partitions, so the followed partition no longer exists. A
// read fails as Misconfigured (no retry helps until an operator acts),
// naming the count.
func TestKafkaReaderPartitionGoneIsMisconfigured(t *testing.T) {
	krEachCluster(t, func(t *testing.T, c *kafkatest.Cluster) {
		ctx := krContext(t)
		topic := c.CreateTopic(t, "reader-shrunk", 2, map[string]string{"cleanup.policy": "compact"})
		tp := Partition{Topic: topic, Partition: 1}
		writer := krWire(t, c, krLease)
		reader := krWire(t, c, krLease).Reader()
		krAppend(t, ctx, writer, tp, 0)
		if _, _, err := reader.ReadFrom(ctx, tp, 0); err != nil {
			t.Fatalf("ReadFrom before: %v", err)
		}
		krRecreate(t, c, topic, 1)
		krAppendAfterRecreate(t, ctx, writer, Partition{Topic: topic, Partition: 0}, 1)
		deadline := time.Now().Add(10 * time.Second)
		for {
			readCtx, cancel := context.WithTimeout(ctx, 2*time.Second)
			_, _, err := reader.ReadFrom(readCtx, tp, 0)
			cancel()
			var e *Error
			if errors.As(err, &e) && e.Class == Misconfigured {
				t.Logf("the read: %v", err)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("ReadFrom of a partition that the topic no longer has = %v after 10 s; want Misconfigured", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	})
}

// TestReaderWaitEndsWhenTheTopicIsCreatedAgain: a read that waits for an
// offset of the old log (a view behind its last stable offset) stops
// waiting when the view starts over on a new log, and asks for the new
// log's offset: the old target may be far past the new log's end.
func TestReaderWaitEndsWhenTheTopicIsCreatedAgain(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	topic := c.CreateTopic(t, "reader-wait", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	reader := krWire(t, c, krLease).Reader()
	if _, _, err := reader.ReadFrom(ctx, tp, 0); err != nil {
		t.Fatalf("ReadFrom: %v", err)
	}
	p, err := reader.follow(tp)
	if err != nil {
		t.Fatal(err)
	}
	reader.mu.Lock()
	incarnation := p.incarnation
	reader.mu.Unlock()
	type result struct {
		reached bool
		err     error
	}
	done := make(chan result, 1)
	go func() {
		reached, err := reader.awaitOffset(ctx, p, 1_000_000, incarnation) // an offset of the old log that the new one never reaches
		done <- result{reached, err}
	}()
	time.Sleep(100 * time.Millisecond)
	reader.mu.Lock()
	p.restartLocked()
	reader.mu.Unlock()
	select {
	case r := <-done:
		if r.reached || r.err != nil {
			t.Fatalf("awaitOffset across the restart = %t, %v; want false and no error", r.reached, r.err)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("the wait for an offset of the old log did not end when the view started over")
	}
}
