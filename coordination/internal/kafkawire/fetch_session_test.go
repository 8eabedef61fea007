package kafkawire

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// fetchLog records the session fields of the Fetch requests that a kfake
// cluster receives.
type fetchLog struct {
	mu       sync.Mutex
	requests []fetchSeen
}

type fetchSeen struct {
	sessionID, epoch int32
	named            int // partitions the request names
}

func (f *fetchLog) observe(c *kafkatest.Cluster) {
	c.Fake.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fetch := req.(*kmsg.FetchRequest)
		named := 0
		for _, t := range fetch.Topics {
			named += len(t.Partitions)
		}
		f.mu.Lock()
		f.requests = append(f.requests, fetchSeen{fetch.SessionID, fetch.SessionEpoch, named})
		f.mu.Unlock()
		return nil, nil, false // observe only
	})
}

func (f *fetchLog) since(n int) []fetchSeen {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fetchSeen(nil), f.requests[min(n, len(f.requests)):]...)
}

func (f *fetchLog) len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.requests)
}

// waitFetches waits until the log holds n more requests than from.
func (f *fetchLog) waitFetches(t *testing.T, from, n int) []fetchSeen {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for f.len() < from+n {
		if time.Now().After(deadline) {
			t.Fatalf("%d Fetch requests after 30 s; want %d", f.len()-from, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
	return f.since(from)
}

// TestKafkaReaderIdleLongPollIsIncremental is a test of issue 12 item 4:
// the long polls of an idle partition run in an incremental fetch session
// (KIP-227), so they name no partition and their empty answers carry none;
// a new record is still read, and the next request names the partition at
// its new offset.
func TestKafkaReaderIdleLongPollIsIncremental(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	lease := krLease
	topic := c.CreateTopic(t, "reader-session", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	writer, reader := krWire(t, c, lease), krWire(t, c, lease)
	krAppend(t, ctx, writer, tp, 0)
	log := new(fetchLog)
	log.observe(c)

	if _, _, err := reader.Reader().ReadFrom(ctx, tp, 0); err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}
	seen := log.waitFetches(t, 0, 3) // the full fetch, then idle long polls
	if first := seen[0]; first.epoch != 0 || first.named != 1 {
		t.Fatalf("the first Fetch = %+v; want a full fetch (epoch 0) of the partition", first)
	}
	for i, f := range seen[2:] {
		if f.sessionID == 0 || f.epoch < 1 || f.named != 0 {
			t.Fatalf("idle Fetch %d = %+v; want an incremental fetch of an open session that names no partition", i+2, f)
		}
	}

	from := log.len()
	key := krAppend(t, ctx, writer, tp, 1)
	records, err := krReadUntil(ctx, reader, tp, key)
	if err != nil || !krHasKey(records, key) {
		t.Fatalf("ReadPartitionFrom after an append = %d records, %v; want %s", len(records), err, key)
	}
	after := log.waitFetches(t, from, 1)
	if f := after[len(after)-1]; f.epoch < 1 || f.named != 1 {
		t.Fatalf("the Fetch after the new record = %+v; want an incremental fetch that names the partition at its new offset", f)
	}
}

// TestKafkaReaderRecoversARefusedSession: a broker that refuses the
// session's epoch (INVALID_FETCH_SESSION_EPOCH, as after a request whose
// answer was lost) costs one full fetch at once, not a failed fetch: no
// backoff, no new lookup of the leader, and a new record is read.
func TestKafkaReaderRecoversARefusedSession(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	lease := krLease
	topic := c.CreateTopic(t, "reader-refused", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	writer, reader := krWire(t, c, lease), krWire(t, c, lease)
	krAppend(t, ctx, writer, tp, 0)
	if _, _, err := reader.Reader().ReadFrom(ctx, tp, 0); err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}

	log := new(fetchLog)
	log.observe(c) // runs before the refusal below: control functions run in order
	var lookups atomic.Int64
	c.Fake.ControlKey(kmsg.Metadata.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		lookups.Add(1)
		return nil, nil, false
	})
	refused := make(chan int, 1)
	c.Fake.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		fetch := req.(*kmsg.FetchRequest)
		if fetch.SessionEpoch < 1 {
			return nil, nil, false // not an incremental request yet
		}
		resp := fetch.ResponseKind().(*kmsg.FetchResponse)
		resp.Version = fetch.Version
		resp.ErrorCode = kerr.InvalidFetchSessionEpoch.Code
		refused <- log.len() // the observer logged this request already
		return resp, nil, true
	})
	var at int
	select {
	case at = <-refused:
	case <-ctx.Done():
		t.Fatalf("no incremental Fetch to refuse")
	}
	next := log.waitFetches(t, at, 1)
	if f := next[0]; f.epoch != 0 || f.named != 1 {
		t.Fatalf("the Fetch after the refusal = %+v; want a full fetch that opens a new session", f)
	}
	key := krAppend(t, ctx, writer, tp, 1)
	records, err := krReadUntil(ctx, reader, tp, key)
	if err != nil || !krHasKey(records, key) {
		t.Fatalf("ReadPartition after the refusal = %d records, %v; want %s", len(records), err, key)
	}
	if n := lookups.Load(); n != 0 {
		t.Fatalf("the reader sent %d Metadata requests after the refusal; want none: a refused session is no failed fetch", n)
	}
}

// krReadUntil reads the follower's view of tp with ReadPartitionFrom until
// it holds key, an error, or the end of ctx: the view may lag a commit by
// the transit of one Fetch response.
func krReadUntil(ctx context.Context, reader *Wire, tp Partition, key string) ([]Record, error) {
	for {
		records, _, err := reader.Reader().ReadFrom(ctx, tp, 0)
		if err != nil || krHasKey(records, key) || ctx.Err() != nil {
			return records, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}
