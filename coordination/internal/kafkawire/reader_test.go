package kafkawire

import (
	"context"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kfake"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The tests of the Reader, on kfake. They derive their bounds from the
// reader's own settings (readerTimings, readerFetchGrace). The transport
// suites of coordination's kafka_transport_test.go run the reader against
// Apache Kafka too.

// krLease is the lease of the reader tests: lease 6 s, renew 2 s, so a long
// poll of 1 s and a freshness bound of 2 s.
var krLease = krTimes{6 * time.Second, 2 * time.Second}

// krDefaultLease is coordination's default lease: 30 s, renewed every
// 10 s, so a long poll of 5 s.
var krDefaultLease = krTimes{30 * time.Second, 10 * time.Second}

// krTimes is a lease duration and its renew interval.
type krTimes struct{ lease, renew time.Duration }

func krWire(t *testing.T, c *kafkatest.Cluster, lease krTimes, options ...kgo.Opt) *Wire {
	t.Helper()
	wire, err := New(Config{Brokers: c.Brokers, Options: options, TxnTimeout: lease.lease, RenewInterval: lease.renew})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(wire.Close)
	return wire
}

func krContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// krAppend appends a record with a fresh key to the partition, and returns
// the key.
func krAppend(t *testing.T, ctx context.Context, writer *Wire, tp Partition, n int) string {
	t.Helper()
	key := fmt.Sprintf("key-%d", n)
	if err := writer.Append(ctx, Record{Partition: tp, Key: []byte(key), Value: []byte("value")}); err != nil {
		t.Fatalf("Append(%s, %s): %v", tp, key, err)
	}
	return key
}

func krHasKey(records []Record, key string) bool {
	return slices.ContainsFunc(records, func(r Record) bool { return string(r.Key) == key })
}

// blackhole is a dialer for franz-go that silences the brokers at chosen
// addresses, as a stopped process or a dropped route does: the requests
// that the client writes to them vanish, and nothing comes back, so a
// request fails only at its deadline. The connections stay open.
type blackhole struct {
	mu     sync.Mutex
	silent map[string]bool
}

func (b *blackhole) silence(addr string, on bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.silent == nil {
		b.silent = make(map[string]bool)
	}
	b.silent[addr] = on
}

func (b *blackhole) isSilent(addr string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.silent[addr]
}

func (b *blackhole) dial(ctx context.Context, network, host string) (net.Conn, error) {
	var d net.Dialer
	conn, err := d.DialContext(ctx, network, host)
	if err != nil {
		return nil, err
	}
	return &holeConn{Conn: conn, hole: b, addr: host}, nil
}

// holeConn swallows what is written to a silenced broker, and drops what
// the broker sends, until its deadline or its close.
type holeConn struct {
	net.Conn
	hole *blackhole
	addr string
}

func (c *holeConn) Write(p []byte) (int, error) {
	if c.hole.isSilent(c.addr) {
		return len(p), nil
	}
	return c.Conn.Write(p)
}

func (c *holeConn) Read(p []byte) (int, error) {
	for {
		n, err := c.Conn.Read(p)
		if err != nil || !c.hole.isSilent(c.addr) {
			return n, err
		}
	}
}

// krBrokerAddr returns the host:port of a broker of the cluster.
func krBrokerAddr(t *testing.T, c *kafkatest.Cluster, node int32) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	brokers, err := c.Admin(t).BrokerMetadata(ctx)
	if err != nil {
		t.Fatalf("BrokerMetadata: %v", err)
	}
	for _, b := range brokers.Brokers {
		if b.NodeID == node {
			return net.JoinHostPort(b.Host, strconv.Itoa(int(b.Port)))
		}
	}
	t.Fatalf("no broker %d in %+v", node, brokers.Brokers)
	return ""
}

// TestKafkaReaderSilentBrokerDelaysOnlyItsPartitions is the regression test
// of issue 9 item 6. The reader used to fetch every leader in one round and
// wait for all of them before the next round, so one broker that stopped
// answering held the view of every partition until its fetch timed out
// (about 15 s). Now each leader has its own loop: while the leader of
// partition 1 is silent, records appended to partition 0, led by the other
// broker, are read at once, over more than two deadlines of the silent
// broker's fetch; and partition 1 is read again once its broker answers.
func TestKafkaReaderSilentBrokerDelaysOnlyItsPartitions(t *testing.T) {
	c := kafkatest.Fake(t, kfake.NumBrokers(2))
	ctx := krContext(t)
	lease := krLease
	topic := c.CreateTopic(t, "reader-silent", 2, nil)
	healthy, silent := c.Fake.LeaderFor(topic, 0), c.Fake.LeaderFor(topic, 1)
	if healthy == silent {
		silent = 1 - healthy
		if err := c.Fake.MoveTopicPartition(topic, 1, silent); err != nil {
			t.Fatalf("MoveTopicPartition: %v", err)
		}
	}
	hole := new(blackhole)
	writer := krWire(t, c, lease)
	reader := krWire(t, c, lease, kgo.Dialer(hole.dial))
	tp0, tp1 := Partition{Topic: topic, Partition: 0}, Partition{Topic: topic, Partition: 1}
	for _, tp := range []Partition{tp0, tp1} {
		key := krAppend(t, ctx, writer, tp, 0)
		records, err := reader.Reader().ReadLog(ctx, tp)
		if err != nil || !krHasKey(records, key) {
			t.Fatalf("ReadPartition(%s) before the silence = %d records, %v; want %s", tp, len(records), err, key)
		}
	}

	hole.silence(krBrokerAddr(t, c, silent), true)
	silencedAt := time.Now()
	maxWait, _ := readerTimings(lease.lease, lease.renew)
	deadline := maxWait + readerFetchGrace // of a fetch to the silent broker
	bound := deadline / 2
	n := 0
	for time.Since(silencedAt) < 2*deadline {
		n++
		key := krAppend(t, ctx, writer, tp0, n)
		start := time.Now()
		readCtx, cancel := context.WithTimeout(ctx, bound)
		records, err := reader.Reader().ReadLog(readCtx, tp0)
		cancel()
		if err != nil || !krHasKey(records, key) {
			t.Fatalf("read %d of %s, %v after broker %d went silent: %d records, %v; want %s within %v "+
				"(half the %v deadline of a fetch to the silent broker): the healthy partition waits for the silent one",
				n, tp0, time.Since(silencedAt), silent, len(records), err, key, bound, deadline)
		}
		if n == 1 || n%10 == 0 {
			t.Logf("read %d of %s took %v, %v after the silence", n, tp0, time.Since(start), time.Since(silencedAt))
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The silence is real: partition 1 is not read while it lasts.
	key1 := krAppend(t, ctx, writer, tp1, 1)
	readCtx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	records, err := reader.Reader().ReadLog(readCtx, tp1)
	cancel()
	if err == nil {
		t.Fatalf("ReadPartition(%s) with its leader %d silent = %d records and no error; the blackhole does not hold", tp1, silent, len(records))
	}

	// Partition 1 is read again once its broker answers.
	hole.silence(krBrokerAddr(t, c, silent), false)
	start := time.Now()
	records, err = reader.Reader().ReadLog(ctx, tp1)
	if err != nil || !krHasKey(records, key1) {
		t.Fatalf("ReadPartition(%s) after the silence = %d records, %v; want %s", tp1, len(records), err, key1)
	}
	t.Logf("%s read again %v after its broker answered", tp1, time.Since(start))
}

// listOffsetsCounter counts the ListOffsets requests of a client.
type listOffsetsCounter struct{ n atomic.Int64 }

func (c *listOffsetsCounter) OnBrokerWrite(_ kgo.BrokerMetadata, key int16, _ int, _, _ time.Duration, err error) {
	if key == kmsg.ListOffsets.Int16() && err == nil {
		c.n.Add(1)
	}
}

// TestKafkaReaderServesACurrentViewWithoutARequest is a test of issue 12
// item 4: a waiting member reads once per poll interval, and each read used
// to cost a ListOffsets request, 60 a minute on an idle standby. While the
// long poll of the partition is current, ReadPartitionFrom is served from
// the view; a new record still arrives with the long poll's answer and
// wakes the watch, and the read after the wake-up holds it, with no
// request. ReadPartition still lists the last stable offset.
func TestKafkaReaderServesACurrentViewWithoutARequest(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	lease := krDefaultLease
	topic := c.CreateTopic(t, "reader-served", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	counter := new(listOffsetsCounter)
	writer := krWire(t, c, lease)
	reader := krWire(t, c, lease, kgo.WithHooks(counter))
	krAppend(t, ctx, writer, tp, 0)

	changed, stop := reader.Reader().Watch(tp)
	defer stop()
	records, next, err := reader.Reader().ReadFrom(ctx, tp, 0)
	if err != nil || len(records) != 1 {
		t.Fatalf("first ReadPartitionFrom = %d records, %v; want 1", len(records), err)
	}
	if got := counter.n.Load(); got != 1 {
		t.Fatalf("the first read sent %d ListOffsets requests; want 1 (the view was not current yet)", got)
	}
	for i := range 20 {
		if _, _, err := reader.Reader().ReadFrom(ctx, tp, next); err != nil {
			t.Fatalf("ReadPartitionFrom %d: %v", i, err)
		}
	}
	if got := counter.n.Load(); got != 1 {
		t.Fatalf("20 reads of a current view sent %d more ListOffsets requests; want none", got-1)
	}

	maxWait, _ := readerTimings(lease.lease, lease.renew)
	for i := 1; i <= 3; i++ {
		drain(changed)
		start := time.Now()
		key := krAppend(t, ctx, writer, tp, i)
		select {
		case <-changed:
		case <-time.After(maxWait / 2):
			t.Fatalf("append %d: no wake-up within %v, half the long poll's max wait %v: a record must end the long poll", i, maxWait/2, maxWait)
		}
		woke := time.Since(start)
		var got []Record
		got, next, err = reader.Reader().ReadFrom(ctx, tp, next)
		if err != nil || !krHasKey(got, key) {
			t.Fatalf("append %d: the read after the wake-up = %d records, %v; want %s", i, len(got), err, key)
		}
		t.Logf("append %d woke the watch after %v", i, woke)
	}
	if got := counter.n.Load(); got != 1 {
		t.Fatalf("the reads after the wake-ups sent %d ListOffsets requests; want none", got-1)
	}
	if _, err := reader.Reader().ReadLog(ctx, tp); err != nil {
		t.Fatalf("ReadPartition: %v", err)
	}
	if got := counter.n.Load(); got != 2 {
		t.Fatalf("ReadPartition sent %d ListOffsets requests; want 1", got-1)
	}
}

func drain(ch <-chan struct{}) {
	for {
		select {
		case <-ch:
		default:
			return
		}
	}
}

// TestKafkaReaderStaleViewIsNotServed: a reader cut off from the leader
// serves its view for at most the freshness bound after the last answer;
// after it, a read lists the last stable offset, and fails at the end of
// its context rather than return a view without the records appended since.
func TestKafkaReaderStaleViewIsNotServed(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	lease := krLease
	topic := c.CreateTopic(t, "reader-stale", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	hole := new(blackhole)
	writer := krWire(t, c, lease)
	reader := krWire(t, c, lease, kgo.Dialer(hole.dial))
	krAppend(t, ctx, writer, tp, 0)
	if _, _, err := reader.Reader().ReadFrom(ctx, tp, 0); err != nil {
		t.Fatalf("ReadPartitionFrom: %v", err)
	}

	hole.silence(c.Brokers[0], true)
	silencedAt := time.Now()
	key := krAppend(t, ctx, writer, tp, 1)
	_, fresh := readerTimings(lease.lease, lease.renew)
	time.Sleep(fresh) // the last answer came before the silence
	readCtx, cancel := context.WithTimeout(ctx, time.Second)
	records, _, err := reader.Reader().ReadFrom(readCtx, tp, 0)
	cancel()
	if err == nil {
		t.Fatalf("ReadPartitionFrom %v after the leader went silent = %d records (holds the new one: %t) and no error; "+
			"want an error: the view is older than the freshness bound %v", time.Since(silencedAt), len(records), krHasKey(records, key), fresh)
	}
	t.Logf("the read of the stale view: %v", err)
}

// TestKafkaReaderJoinsAParkedLongPoll: a partition that starts to be
// followed while its leader holds the loop's long poll is read at once,
// not when the long poll ends. The reader cuts the long poll short.
func TestKafkaReaderJoinsAParkedLongPoll(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	lease := krDefaultLease // a long poll of 5 s
	maxWait, _ := readerTimings(lease.lease, lease.renew)
	topic := c.CreateTopic(t, "reader-join", 2, nil)
	tp0, tp1 := Partition{Topic: topic, Partition: 0}, Partition{Topic: topic, Partition: 1}
	writer := krWire(t, c, lease)
	reader := krWire(t, c, lease)
	krAppend(t, ctx, writer, tp0, 0)
	key := krAppend(t, ctx, writer, tp1, 1)

	var fetches atomic.Int64
	c.Fake.ControlKey(kmsg.Fetch.Int16(), func(kmsg.Request) (kmsg.Response, error, bool) {
		fetches.Add(1)
		return nil, nil, false // observe only
	})
	if _, err := reader.Reader().ReadLog(ctx, tp0); err != nil {
		t.Fatalf("ReadPartition(%s): %v", tp0, err)
	}
	// Wait for the next fetch to reach the broker: the partition is read to
	// its end, so the broker holds it for the max wait.
	seen := fetches.Load()
	for fetches.Load() == seen {
		if ctx.Err() != nil {
			t.Fatalf("no long poll after the read")
		}
		time.Sleep(5 * time.Millisecond)
	}
	start := time.Now()
	readCtx, cancel := context.WithTimeout(ctx, maxWait/2)
	records, err := reader.Reader().ReadLog(readCtx, tp1)
	cancel()
	if err != nil || !krHasKey(records, key) {
		t.Fatalf("ReadPartition(%s) while the long poll of %s is parked = %d records, %v after %v; "+
			"want %s within %v, half the long poll's max wait %v", tp1, tp0, len(records), err, time.Since(start), key, maxWait/2, maxWait)
	}
	t.Logf("the new partition was read %v after the read began", time.Since(start))
}

func TestReaderTimings(t *testing.T) {
	for _, tc := range []struct {
		duration, renew        time.Duration
		wantMaxWait, wantFresh time.Duration
	}{
		{30 * time.Second, 10 * time.Second, 5 * time.Second, 10 * time.Second}, // the default lease
		{6 * time.Second, 2 * time.Second, time.Second, 2 * time.Second},
		{500 * time.Millisecond, 150 * time.Millisecond, 87500 * time.Microsecond, 175 * time.Millisecond},
		{10 * time.Minute, time.Minute, readerMaxWaitCap, 2 * readerMaxWaitCap},
		{20 * time.Millisecond, 10 * time.Millisecond, readerMinWait, 5 * time.Millisecond},
	} {
		maxWait, fresh := readerTimings(tc.duration, tc.renew)
		if maxWait != tc.wantMaxWait || fresh != tc.wantFresh {
			t.Errorf("readerTimings(%v, %v) = %v, %v; want %v, %v", tc.duration, tc.renew, maxWait, fresh, tc.wantMaxWait, tc.wantFresh)
		}
		if slack := tc.duration - tc.renew; fresh > slack {
			t.Errorf("readerTimings(%v, %v): a view may be %v old, more than the lease slack %v: a holder that renews on time would look expired", tc.duration, tc.renew, fresh, slack)
		}
	}
}
