package kafkawire

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// The tests of the selections of a view (selection.go) and of the fill of
// a group that joins late (backfill.go): the reads of a group must return
// what the compacted whole log holds of it, whenever the group joined,
// while the view holds no record of a group that nobody selected.

// slashGroup is the KeyGroup of these tests: the bytes before the first
// '/' of a key.
func slashGroup(key []byte) []byte {
	i := bytes.IndexByte(key, '/')
	if i < 0 {
		return nil
	}
	return key[:i]
}

func ksWire(t *testing.T, c *kafkatest.Cluster, group KeyGroup) *Wire {
	t.Helper()
	wire, err := New(Config{Brokers: c.Brokers, TxnTimeout: krLease.lease, RenewInterval: krLease.renew, KeyGroup: group})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(wire.Close)
	return wire
}

// ksAppend appends key=value (a nil value for "") and fails the test on an
// error.
func ksAppend(t *testing.T, ctx context.Context, w *Wire, tp Partition, key, value string) {
	t.Helper()
	var v []byte
	if value != "" {
		v = []byte(value)
	}
	if err := w.Append(ctx, Record{Partition: tp, Key: []byte(key), Value: v}); err != nil {
		t.Fatalf("Append(%s): %v", key, err)
	}
}

// compacted folds a log as the view does: the newest record of every key,
// in offset order, of the groups given (every record for none).
func compacted(log []Record, groups ...string) string {
	var v View
	for _, r := range log {
		if len(groups) > 0 {
			g := slashGroup(r.Key)
			found := false
			for _, want := range groups {
				found = found || string(g) == want
			}
			if !found {
				continue
			}
		}
		v.Add(r.Offset, r.Key, r.Value, r.Timestamp)
	}
	return viewText(v.Records(0, nil))
}

// ksViewLen returns the number of records that the view of tp holds.
func ksViewLen(r *Reader, tp Partition) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.parts[tp].view.Len()
}

// ksCheck reads groups from 0 and compares with the compacted whole log.
func ksCheck(t *testing.T, ctx context.Context, r *Reader, tp Partition, groups ...string) int64 {
	t.Helper()
	log, err := r.ReadLog(ctx, tp)
	if err != nil {
		t.Fatalf("ReadLog: %v", err)
	}
	got, next, err := r.ReadGroupsFrom(ctx, tp, groups, 0)
	if err != nil {
		t.Fatalf("ReadGroupsFrom(%v): %v", groups, err)
	}
	if want := compacted(log, groups...); viewText(got) != want {
		t.Fatalf("ReadGroupsFrom(%v) =\n%s\nthe compacted log holds\n%s", groups, viewText(got), want)
	}
	return next
}

func TestReaderViewKeepsTheSelectedGroups(t *testing.T) {
	t.Run("kfake", func(t *testing.T) { testReaderViewKeepsTheSelectedGroups(t, kafkatest.Fake(t)) })
	t.Run("kafka", func(t *testing.T) { testReaderViewKeepsTheSelectedGroups(t, kafkatest.Kafka(t)) })
}

func testReaderViewKeepsTheSelectedGroups(t *testing.T, c *kafkatest.Cluster) {
	ctx := krContext(t)
	topic := c.CreateTopic(t, "reader-selection", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	writer := ksWire(t, c, nil)
	for _, kv := range [][2]string{
		{"a/1", "1"}, {"b/1", "1"}, {"a/2", "1"}, {"b/2", "1"}, {"c/1", "1"}, {"nogroup", "1"},
		{"a/1", "2"}, {"b/1", ""}, {"b/3", "1"}, {"b/2", "2"},
	} {
		ksAppend(t, ctx, writer, tp, kv[0], kv[1])
	}
	wire := ksWire(t, c, slashGroup)
	r := wire.Reader()
	r.mu.Lock()
	r.linger = 0 // a group leaves the view at its last release (TestReaderViewLingers)
	r.mu.Unlock()

	// Group a from the first fetch on: no walk needed.
	releaseA := r.Keep(tp, []string{"a"})
	defer releaseA()
	ksCheck(t, ctx, r, tp, "a")
	if got := ksViewLen(r, tp); got != 2 {
		t.Fatalf("the view keeps %d records for group a; want its 2 keys", got)
	}

	// Group b joins the view late: its older records come from a walk.
	releaseB := r.Keep(tp, []string{"b"})
	ksCheck(t, ctx, r, tp, "b")
	ksCheck(t, ctx, r, tp, "a", "b")
	if got := ksViewLen(r, tp); got != 5 {
		t.Fatalf("the view keeps %d records for groups a and b; want their 5 keys", got)
	}

	// New records of every group; the incremental reads see those of the
	// groups read.
	_, nextA, err := r.ReadGroupsFrom(ctx, tp, []string{"a"}, 0)
	if err != nil {
		t.Fatalf("ReadGroupsFrom: %v", err)
	}
	ksAppend(t, ctx, writer, tp, "c/2", "1")
	ksAppend(t, ctx, writer, tp, "a/2", "")
	ksAppend(t, ctx, writer, tp, "b/4", "1")
	if _, err := r.ReadLog(ctx, tp); err != nil { // waits until the view holds them
		t.Fatalf("ReadLog: %v", err)
	}
	got, _, err := r.ReadGroupsFrom(ctx, tp, []string{"a"}, nextA)
	if err != nil || viewText(got) != fmt.Sprintf("%d:a/2= ", nextA+1) {
		t.Fatalf("the incremental read of group a = %s, %v; want only the tombstone of a/2 at %d", viewText(got), err, nextA+1)
	}
	ksCheck(t, ctx, r, tp, "a", "b")

	// Released, group b leaves the view; a read without a hold walks.
	releaseB()
	releaseB()
	if got := ksViewLen(r, tp); got != 2 {
		t.Fatalf("after the release of group b the view keeps %d records; want group a's 2", got)
	}
	ksCheck(t, ctx, r, tp, "b")
	if got := ksViewLen(r, tp); got != 2 {
		t.Fatalf("after a read of group b without a hold the view keeps %d records; want group a's 2", got)
	}

	// The whole partition: filled once, kept for good.
	log, err := r.ReadLog(ctx, tp)
	if err != nil {
		t.Fatalf("ReadLog: %v", err)
	}
	whole, _, err := r.ReadFrom(ctx, tp, 0)
	if err != nil || viewText(whole) != compacted(log) {
		t.Fatalf("ReadFrom = %s, %v; the compacted log holds %s", viewText(whole), err, compacted(log))
	}
	releaseA()
	if got, want := ksViewLen(r, tp), len(whole); got != want {
		t.Fatalf("a view of the whole partition keeps %d records after a release; want %d", got, want)
	}
	ksCheck(t, ctx, r, tp, "c")
}

// TestReaderLateGroupsUnderConcurrentAppends joins groups to a view while
// a writer supersedes their keys, and checks every group against the
// compacted log once the writer stopped: a record that the fetch loop adds
// during a fill's walk must win over the walk's older record of its key.
func TestReaderLateGroupsUnderConcurrentAppends(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	topic := c.CreateTopic(t, "reader-selection-race", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	writer := ksWire(t, c, nil)
	groups := []string{"g0", "g1", "g2", "g3", "g4", "g5"}
	for i := range 60 {
		ksAppend(t, ctx, writer, tp, fmt.Sprintf("%s/%d", groups[i%len(groups)], i%7), fmt.Sprint(i))
	}
	wire := ksWire(t, c, slashGroup)
	r := wire.Reader()
	release := r.Keep(tp, groups[:1])
	defer release()
	if _, _, err := r.ReadGroupsFrom(ctx, tp, groups[:1], 0); err != nil {
		t.Fatalf("ReadGroupsFrom: %v", err)
	}

	writeCtx, stopWriting := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		rng := rand.New(rand.NewPCG(1, 2))
		for i := 0; writeCtx.Err() == nil; i++ {
			g := groups[rng.IntN(len(groups))]
			value := fmt.Sprint(i)
			if rng.IntN(5) == 0 {
				value = ""
			}
			var v []byte
			if value != "" {
				v = []byte(value)
			}
			_ = writer.Append(writeCtx, Record{Partition: tp, Key: []byte(fmt.Sprintf("%s/%d", g, rng.IntN(7))), Value: v})
		}
	})
	var releases []func()
	for _, g := range groups[1:] {
		time.Sleep(20 * time.Millisecond)
		releases = append(releases, r.Keep(tp, []string{g}))
		if _, _, err := r.ReadGroupsFrom(ctx, tp, []string{g}, 0); err != nil {
			t.Fatalf("ReadGroupsFrom(%s): %v", g, err)
		}
	}
	time.Sleep(50 * time.Millisecond)
	stopWriting()
	wg.Wait()
	for _, g := range groups {
		ksCheck(t, ctx, r, tp, g)
	}
	ksCheck(t, ctx, r, tp, groups...)
	for _, release := range releases {
		release()
	}
}

// TestReaderViewLingers releases a group and reads it again within the
// linger, which costs no walk, and then waits for the fetch loop to drop
// it once the linger passed.
func TestReaderViewLingers(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	topic := c.CreateTopic(t, "reader-linger", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	writer := ksWire(t, c, nil)
	for _, key := range []string{"a/1", "b/1", "b/2", "a/2"} {
		ksAppend(t, ctx, writer, tp, key, "1")
	}
	wire := ksWire(t, c, slashGroup)
	r := wire.Reader()
	const linger = 300 * time.Millisecond
	r.mu.Lock()
	r.linger = linger
	r.mu.Unlock()
	release := r.Keep(tp, []string{"a"})
	ksCheck(t, ctx, r, tp, "a")
	ksCheck(t, ctx, r, tp, "b") // a read without a hold: a walk, and b lingers
	release()
	if got := ksViewLen(r, tp); got != 4 {
		t.Fatalf("right after the releases the view keeps %d records; want the 4 of a and b", got)
	}
	r.mu.Lock()
	filled := r.parts[tp].sel.groups["b"].filled
	r.mu.Unlock()
	if !filled {
		t.Fatalf("a lingering group is no longer filled")
	}
	// The fetch loop's next answer after the linger drops both (a long
	// poll of krLease is 1 s).
	deadline := time.Now().Add(5 * time.Second)
	for ksViewLen(r, tp) != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("the view still keeps %d records %v after the linger", ksViewLen(r, tp), 5*time.Second)
		}
		time.Sleep(50 * time.Millisecond)
	}
	ksCheck(t, ctx, r, tp, "a", "b") // filled again, by a walk
}

// ksWalks counts the Fetch requests of log walks on a kfake cluster: the
// ones without a long poll.
func ksWalks(c *kafkatest.Cluster) *atomic.Int64 {
	var n atomic.Int64
	c.Fake.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.(*kmsg.FetchRequest).MaxWaitMillis == 0 {
			n.Add(1)
		}
		return nil, nil, false // observe only
	})
	return &n
}

// TestReaderFillWalksOnlyWhenNeeded: a group that no record of the log
// belongs to joins the view without a walk (seen.go), and many groups
// that join at once share few walks (backfill.go).
func TestReaderFillWalksOnlyWhenNeeded(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	topic := c.CreateTopic(t, "reader-fill-walks", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	writer := ksWire(t, c, nil)
	const groups = 40
	for i := range 3 * groups {
		ksAppend(t, ctx, writer, tp, fmt.Sprintf("w%d/%d", i%groups, i), "1")
	}
	walks := ksWalks(c)
	wire := ksWire(t, c, slashGroup)
	r := wire.Reader()
	release := r.Keep(tp, []string{"w0"})
	defer release()
	if _, _, err := r.ReadGroupsFrom(ctx, tp, []string{"w0"}, 0); err != nil {
		t.Fatalf("ReadGroupsFrom: %v", err)
	}
	if got := walks.Load(); got != 0 {
		t.Fatalf("the first group of a partition cost %d walk fetches; want none (the fetch loop reads the log from its start)", got)
	}
	for i := range groups {
		fresh := fmt.Sprintf("fresh%d", i)
		release := r.Keep(tp, []string{fresh})
		if _, _, err := r.ReadGroupsFrom(ctx, tp, []string{fresh}, 0); err != nil {
			t.Fatalf("ReadGroupsFrom(%s): %v", fresh, err)
		}
		release()
	}
	// A false positive of the filter would walk: at 40 groups, about
	// one chance in ten million each.
	if got := walks.Load(); got != 0 {
		t.Fatalf("%d groups without a record cost %d walk fetches; want none", groups, got)
	}

	// The first walk waits in the broker until every other group queued
	// for the next one.
	var held atomic.Bool
	c.Fake.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		if req.(*kmsg.FetchRequest).MaxWaitMillis != 0 || held.Swap(true) {
			c.Fake.KeepControl()
			return nil, nil, false
		}
		c.Fake.SleepControl(func() {
			for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
				r.mu.Lock()
				queued := len(r.parts[tp].sel.queue)
				r.mu.Unlock()
				if queued == groups-2 {
					return
				}
			}
		})
		c.Fake.KeepControl()
		return nil, nil, false
	})
	var wg sync.WaitGroup
	errs := make(chan error, groups)
	for i := 1; i < groups; i++ {
		g := fmt.Sprintf("w%d", i)
		release := r.Keep(tp, []string{g})
		defer release()
		wg.Go(func() {
			if _, _, err := r.ReadGroupsFrom(ctx, tp, []string{g}, 0); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("ReadGroupsFrom: %v", err)
	}
	if got := walks.Load(); got != 2 {
		t.Fatalf("%d groups with records that joined during a walk cost %d walk fetches; want 2: the walk, and one for all the others", groups-1, got)
	}
	for i := range groups {
		ksCheck(t, ctx, r, tp, fmt.Sprintf("w%d", i))
	}
}

// TestReaderViewStartsAgainAfterTheLogStartMoved: the log start moves
// past the view's position (DeleteRecords while its fetch loop is held
// back), so the view starts again from the log start, with its selection;
// the groups read afterwards, a held one and one that joins, still match
// the compacted log.
func TestReaderViewStartsAgainAfterTheLogStartMoved(t *testing.T) {
	c := kafkatest.Fake(t)
	ctx := krContext(t)
	topic := c.CreateTopic(t, "reader-selection-reset", 1, nil)
	tp := Partition{Topic: topic, Partition: 0}
	writer := ksWire(t, c, nil)
	for _, key := range []string{"a/1", "b/1", "a/2", "b/2"} {
		ksAppend(t, ctx, writer, tp, key, "1")
	}
	wire := ksWire(t, c, slashGroup)
	r := wire.Reader()
	release := r.Keep(tp, []string{"a"})
	defer release()
	ksCheck(t, ctx, r, tp, "a")

	// Hold the fetch loop's next long poll in the broker.
	var block, blocked atomic.Bool
	unblock := make(chan struct{})
	c.Fake.ControlKey(kmsg.Fetch.Int16(), func(req kmsg.Request) (kmsg.Response, error, bool) {
		c.Fake.KeepControl()
		if req.(*kmsg.FetchRequest).MaxWaitMillis != 0 && block.Load() && !blocked.Swap(true) {
			c.Fake.SleepControl(func() { <-unblock })
		}
		return nil, nil, false
	})
	block.Store(true)
	ksAppend(t, ctx, writer, tp, "a/3", "1") // ends the long poll in flight
	for deadline := time.Now().Add(10 * time.Second); !blocked.Load(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			close(unblock)
			t.Fatalf("the fetch loop sent no long poll within 10 s")
		}
	}
	for _, key := range []string{"a/1", "b/3", "a/4"} {
		ksAppend(t, ctx, writer, tp, key, "2")
	}
	admin := c.Admin(t)
	ends, err := admin.ListEndOffsets(ctx, topic)
	if err != nil {
		close(unblock)
		t.Fatalf("ListEndOffsets: %v", err)
	}
	end, _ := ends.Lookup(topic, 0)
	deleted, err := admin.DeleteRecords(ctx, kadm.Offsets{topic: {0: kadm.Offset{Topic: topic, Partition: 0, At: end.Offset - 1}}})
	if err == nil {
		err = deleted.Error()
	}
	close(unblock)
	if err != nil {
		t.Fatalf("DeleteRecords: %v", err)
	}
	for _, key := range []string{"b/4", "a/5", "a/1"} {
		ksAppend(t, ctx, writer, tp, key, "3")
	}
	ksCheck(t, ctx, r, tp, "a")
	ksCheck(t, ctx, r, tp, "b")
	ksCheck(t, ctx, r, tp, "a", "b")
	r.mu.Lock()
	resets := r.parts[tp].sel.gen
	r.mu.Unlock()
	if resets == 0 {
		t.Fatalf("the view did not start again: the test did not move the log start past it")
	}
}
