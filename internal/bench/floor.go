package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/kversion"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// The protocol floor: the least that Kafka's protocol takes for a guarded
// write and for a handover, sent as raw kmsg requests over one franz-go
// client per member, with no code of package coordination between the
// client and the broker (the floor borrows only the codec, for records of
// the library's sizes). Its requests take the versions the library takes
// (coordination/kafka_transport.go, leaseVersions): EndTxn at most 4, so
// that a commit under transaction.version=2 keeps the epoch; Produce at
// most 11 and AddPartitionsToTxn at most 3, so that a transaction names its
// partitions explicitly.
//
//   - A guarded write is AddPartitionsToTxn, Produce (acks=all) and EndTxn
//     under a fixed epoch.
//   - A handover is the holder's tombstone transaction (AddPartitionsToTxn,
//     Produce of a null lease value, EndTxn), the standby's parked
//     read_committed Fetch returning when the commit markers move the last
//     stable offset, the standby's InitProducerId, and its first lease
//     transaction (AddPartitionsToTxn, Produce, EndTxn).
//
// A request that the coordinator refuses with CONCURRENT_TRANSACTIONS (the
// markers of the previous commit are still being written) goes again on the
// library's schedule (resendConcurrent).

// floorVersions are the request versions of the floor's clients: franz-go's
// stable versions with the caps of the library's transactional client.
func floorVersions() *kversion.Versions {
	v := kversion.Stable()
	for key, limit := range map[kmsg.Key]int16{kmsg.EndTxn: 4, kmsg.Produce: 11, kmsg.AddPartitionsToTxn: 3} {
		if max, ok := v.LookupMaxKeyVersion(key.Int16()); ok && max > limit {
			v.SetMaxKeyVersion(key.Int16(), limit)
		}
	}
	return v
}

// floorClient opens the one franz-go client of a floor member.
func (k *Kafka) floorClient(extra ...kgo.Opt) (*kgo.Client, error) {
	opts := append([]kgo.Opt{kgo.SeedBrokers(k.Brokers...), kgo.MaxVersions(floorVersions())}, k.ClientOptions...)
	return kgo.NewClient(append(opts, extra...)...)
}

// floorProducer is the transactional state of one floor member for one
// transactional id: its coordinator, its epoch, the next sequence number of
// each partition it wrote under that epoch, and the leaders and topic ids
// of the partitions it uses. It is used by one goroutine at a time.
type floorProducer struct {
	client *kgo.Client
	txnID  string
	coord  int32
	id     int64
	epoch  int16
	seq    map[coordination.TopicPartition]int32
	topics map[string]floorTopic
}

type floorTopic struct {
	id      [16]byte
	leaders []int32
}

func newFloorProducer(client *kgo.Client, txnID string) *floorProducer {
	return &floorProducer{client: client, txnID: txnID, coord: -1, id: -1, epoch: -1,
		seq: make(map[coordination.TopicPartition]int32), topics: make(map[string]floorTopic)}
}

// prepare looks up the transaction coordinator of the id and the leaders of
// topics: the setup that a warm client has done before it is measured.
func (f *floorProducer) prepare(ctx context.Context, topics ...string) error {
	req := kmsg.NewPtrFindCoordinatorRequest()
	req.CoordinatorType = 1
	req.CoordinatorKey = f.txnID
	req.CoordinatorKeys = []string{f.txnID}
	for {
		resp, err := req.RequestWith(ctx, f.client)
		if err != nil {
			return fmt.Errorf("FindCoordinator: %w", err)
		}
		node, code := resp.NodeID, resp.ErrorCode
		if len(resp.Coordinators) > 0 {
			node, code = resp.Coordinators[0].NodeID, resp.Coordinators[0].ErrorCode
		}
		err = kerr.ErrorForCode(code)
		if err == nil {
			f.coord = node
			break
		}
		if !kerr.IsRetriable(err) || ctx.Err() != nil {
			return fmt.Errorf("FindCoordinator: %w", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	meta := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		meta.Topics = append(meta.Topics, rt)
	}
	resp, err := meta.RequestWith(ctx, f.client)
	if err != nil {
		return fmt.Errorf("Metadata: %w", err)
	}
	for _, t := range resp.Topics {
		if err := kerr.ErrorForCode(t.ErrorCode); err != nil || t.Topic == nil {
			return fmt.Errorf("Metadata of %v: %w", t.Topic, err)
		}
		leaders := make([]int32, len(t.Partitions))
		for _, p := range t.Partitions {
			leaders[p.Partition] = p.Leader
		}
		f.topics[*t.Topic] = floorTopic{id: t.TopicID, leaders: leaders}
	}
	return nil
}

// resendConcurrent sends the request that do sends until the coordinator
// answers something other than CONCURRENT_TRANSACTIONS, or for 10 s, on
// the library's schedule (coordination/kafka_epoch.go,
// withConcurrentTransactions): three resends at once, then a pause of
// 250 µs before each. Resending at once without end is not a floor: under
// load it sends hundreds of requests per transaction and slows the
// coordinator that it waits for.
func resendConcurrent(ctx context.Context, do func() error) error {
	deadline := time.Now().Add(10 * time.Second)
	for attempt := 0; ; attempt++ {
		err := do()
		if !errors.Is(err, kerr.ConcurrentTransactions) || ctx.Err() != nil || time.Now().After(deadline) {
			return err
		}
		if attempt >= 3 {
			time.Sleep(250 * time.Microsecond)
		}
	}
}

// initProducerID mints the next epoch of the id.
func (f *floorProducer) initProducerID(ctx context.Context, timeout time.Duration) error {
	timeoutMillis := timeout.Milliseconds()
	if timeoutMillis < 0 || timeoutMillis > math.MaxInt32 {
		return fmt.Errorf("transaction timeout %v does not fit InitProducerId's int32 TransactionTimeoutMillis: want 0 to %d ms", timeout, math.MaxInt32)
	}
	return resendConcurrent(ctx, func() error {
		req := kmsg.NewPtrInitProducerIDRequest()
		req.TransactionalID = &f.txnID
		req.TransactionTimeoutMillis = int32(timeoutMillis) //nolint:gosec // checked above, outside the closure
		req.ProducerID, req.ProducerEpoch = -1, -1
		kresp, err := f.client.Broker(int(f.coord)).Request(ctx, req)
		if err != nil {
			return fmt.Errorf("InitProducerId: %w", err)
		}
		resp := kresp.(*kmsg.InitProducerIDResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		f.id, f.epoch = resp.ProducerID, resp.ProducerEpoch
		clear(f.seq)
		return nil
	})
}

// floorSteps are the instants of one transaction, from its start.
type floorSteps struct {
	added, produced, committed time.Duration
}

// transact runs one transaction of one record under the current epoch:
// AddPartitionsToTxn, Produce, EndTxn(commit).
func (f *floorProducer) transact(ctx context.Context, tp coordination.TopicPartition, key, value []byte) (floorSteps, error) {
	return f.transactRecords(ctx, tp, key, value, 1)
}

// transactRecords runs one transaction of n records, all alike, in one
// batch under the current epoch: AddPartitionsToTxn, Produce, EndTxn(commit).
func (f *floorProducer) transactRecords(ctx context.Context, tp coordination.TopicPartition, key, value []byte, n int) (floorSteps, error) {
	start := time.Now()
	var steps floorSteps
	err := resendConcurrent(ctx, func() error {
		req := kmsg.NewPtrAddPartitionsToTxnRequest()
		req.TransactionalID = f.txnID
		req.ProducerID, req.ProducerEpoch = f.id, f.epoch
		topic := kmsg.NewAddPartitionsToTxnRequestTopic()
		topic.Topic = tp.Topic
		topic.Partitions = []int32{int32(tp.Partition)} //nolint:gosec // a partition of a topic the bench made (placement.go)
		req.Topics = append(req.Topics, topic)
		kresp, err := f.client.Broker(int(f.coord)).Request(ctx, req)
		if err != nil {
			return fmt.Errorf("AddPartitionsToTxn: %w", err)
		}
		for _, t := range kresp.(*kmsg.AddPartitionsToTxnResponse).Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		return steps, err
	}
	steps.added = time.Since(start)

	leaders := f.topics[tp.Topic].leaders
	if tp.Partition >= len(leaders) {
		return steps, fmt.Errorf("no leader known for %s", tp)
	}
	seq := f.seq[tp]
	batch := floorBatchOf(f.id, f.epoch, seq, key, value, n)
	preq := kmsg.NewPtrProduceRequest()
	preq.TransactionID = &f.txnID
	preq.Acks = -1
	preq.TimeoutMillis = 10_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = tp.Topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = int32(tp.Partition) //nolint:gosec // a partition of a topic the bench made
	pp.Records = batch
	pt.Partitions = append(pt.Partitions, pp)
	preq.Topics = append(preq.Topics, pt)
	kresp, err := f.client.Broker(int(leaders[tp.Partition])).Request(ctx, preq)
	if err != nil {
		return steps, fmt.Errorf("Produce: %w", err)
	}
	for _, t := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return steps, fmt.Errorf("Produce: %w", err)
			}
		}
	}
	f.seq[tp] = seq + int32(n) //nolint:gosec // a transaction of the bench's few records
	steps.produced = time.Since(start)

	err = resendConcurrent(ctx, func() error {
		req := kmsg.NewPtrEndTxnRequest()
		req.TransactionalID = f.txnID
		req.ProducerID, req.ProducerEpoch = f.id, f.epoch
		req.Commit = true
		kresp, err := f.client.Broker(int(f.coord)).Request(ctx, req)
		if err != nil {
			return fmt.Errorf("EndTxn: %w", err)
		}
		resp := kresp.(*kmsg.EndTxnResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return err
		}
		if resp.ProducerEpoch >= 0 && resp.ProducerEpoch != f.epoch {
			return fmt.Errorf("EndTxn moved the epoch from %d to %d: the version cap did not hold", f.epoch, resp.ProducerEpoch)
		}
		return nil
	})
	steps.committed = time.Since(start)
	return steps, err
}

// floorBatch encodes one record as a transactional record batch (magic 2,
// uncompressed), as franz-go's producer and the library's transport do.
func floorBatch(id int64, epoch int16, seq int32, key, value []byte) []byte {
	return floorBatchOf(id, epoch, seq, key, value, 1)
}

// floorBatchOf encodes n records, all alike, as one record batch.
func floorBatchOf(id int64, epoch int16, seq int32, key, value []byte, n int) []byte {
	var attributes int16 = 0x10
	if id < 0 {
		attributes = 0 // a plain batch, of no producer
	}
	now := time.Now().UnixMilli()
	var records []byte
	for i := range n {
		record := kmsg.Record{Key: key, Value: value, OffsetDelta: int32(i)}
		record.Length = int32(len(record.AppendTo(nil)) - 1) //nolint:gosec // a bench record of a few bytes
		records = record.AppendTo(records)
	}
	batch := kmsg.RecordBatch{
		PartitionLeaderEpoch: -1, Magic: 2, Attributes: attributes,
		FirstTimestamp: now, MaxTimestamp: now,
		ProducerID: id, ProducerEpoch: epoch, FirstSequence: seq,
		LastOffsetDelta: int32(n - 1), NumRecords: int32(n), Records: records, //nolint:gosec // a batch of the bench's few records
	}
	raw := batch.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12)) //nolint:gosec // a batch of the bench's few records
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

// settled returns the end offset of a partition once no transaction is open
// on it: its last stable offset equals its high watermark, so the markers
// of the previous commit are written.
func (f *floorProducer) settled(ctx context.Context, tp coordination.TopicPartition) (int64, error) {
	for {
		lso, err := f.listOffset(ctx, tp, 1)
		if err != nil {
			return 0, err
		}
		hwm, err := f.listOffset(ctx, tp, 0)
		if err != nil {
			return 0, err
		}
		if lso == hwm {
			return lso, nil
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// listOffset returns the end offset of a partition from its leader: the
// last stable offset for isolation 1 (read_committed), the high watermark
// for 0.
func (f *floorProducer) listOffset(ctx context.Context, tp coordination.TopicPartition, isolation int8) (int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = tp.Topic
	rp := kmsg.NewListOffsetsRequestTopicPartition()
	rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = int32(tp.Partition), -1, -1 //nolint:gosec // a partition of a topic the bench made
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := f.client.Broker(int(f.topics[tp.Topic].leaders[tp.Partition])).Request(ctx, req)
	if err != nil {
		return 0, err
	}
	for _, t := range kresp.(*kmsg.ListOffsetsResponse).Topics {
		if len(t.Partitions) == 0 {
			continue
		}
		p := t.Partitions[0] // the request asked for one partition
		if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
			return 0, err
		}
		return p.Offset, nil
	}
	return 0, errors.New("ListOffsets: no partition in the answer")
}

// fetchUntil sends read_committed Fetch requests (sessionless, a long poll
// of maxWait, one byte at least) for the partition, from offset and then
// from each last stable offset that an answer gives, as a reader does,
// until an answer's last stable offset reaches until, and returns when
// that answer came.
func (f *floorProducer) fetchUntil(ctx context.Context, tp coordination.TopicPartition, offset, until int64, maxWait time.Duration) (time.Time, error) {
	topic := f.topics[tp.Topic]
	for {
		req := kmsg.NewPtrFetchRequest()
		req.ReplicaID = -1
		req.MaxWaitMillis = int32(min(maxWait, time.Minute).Milliseconds()) //nolint:gosec // at most a minute
		req.MinBytes = 1
		req.MaxBytes = 1 << 20
		req.IsolationLevel = 1
		req.SessionID, req.SessionEpoch = 0, -1
		rt := kmsg.NewFetchRequestTopic()
		rt.Topic, rt.TopicID = tp.Topic, topic.id
		rp := kmsg.NewFetchRequestTopicPartition()
		rp.Partition, rp.FetchOffset, rp.PartitionMaxBytes = int32(tp.Partition), offset, 1<<20 //nolint:gosec // a partition of a topic the bench made
		rp.CurrentLeaderEpoch, rp.LastFetchedEpoch, rp.LogStartOffset = -1, -1, -1
		rt.Partitions = append(rt.Partitions, rp)
		req.Topics = append(req.Topics, rt)
		kresp, err := f.client.Broker(int(topic.leaders[tp.Partition])).Request(ctx, req)
		if err != nil {
			return time.Time{}, fmt.Errorf("Fetch: %w", err)
		}
		resp := kresp.(*kmsg.FetchResponse)
		if err := kerr.ErrorForCode(resp.ErrorCode); err != nil {
			return time.Time{}, fmt.Errorf("Fetch: %w", err)
		}
		for _, t := range resp.Topics {
			for _, p := range t.Partitions {
				if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
					return time.Time{}, fmt.Errorf("Fetch: %w", err)
				}
				if p.LastStableOffset >= until {
					return time.Now(), nil
				}
				offset = max(offset, p.LastStableOffset)
			}
		}
		if ctx.Err() != nil {
			return time.Time{}, ctx.Err()
		}
	}
}

// floorLease is the lease of the floor's handover: the key and a value of
// the library's sizes.
func floorLease(role coordination.Role, member coordination.MemberID) (key, value []byte) {
	key = coordination.EncodeKey(coordination.LeaseKey(role))
	value = coordination.EncodeLease(coordination.Lease{Member: member, GrantedAt: time.Now().UnixMilli(), Deadline: time.Now().Add(10 * time.Second).UnixMilli()})
	return key, value
}

// FloorWrite is the floor of a guarded write: one member that minted once
// and writes one command per transaction to one partition of a data topic.
type FloorWrite struct {
	client *kgo.Client
	trace  tracer
	p      *floorProducer
	tp     coordination.TopicPartition
}

// NewFloorWrite opens the floor's writer on a fresh data topic and mints
// its epoch.
func (k *Kafka) NewFloorWrite(ctx context.Context) (*FloorWrite, error) {
	data, err := k.DataTopic(ctx, "krabka-bench-floor-cmd", 1)
	if err != nil {
		return nil, err
	}
	w := &FloorWrite{tp: coordination.TopicPartition{Topic: data}}
	client, err := k.floorClient(w.trace.hook(0))
	if err != nil {
		return nil, err
	}
	id, err := k.transactionalID(ctx, "bench-floor-write")
	if err != nil {
		client.Close()
		return nil, err
	}
	w.client, w.p = client, newFloorProducer(client, id)
	if err := w.p.prepare(ctx, data); err != nil {
		client.Close()
		return nil, err
	}
	if err := w.p.initProducerID(ctx, 30*time.Second); err != nil {
		client.Close()
		return nil, err
	}
	return w, nil
}

// Sample is one guarded write of the floor, timed.
func (w *FloorWrite) Sample(ctx context.Context) (Sample, error) {
	w.trace.begin()
	start := time.Now()
	steps, err := w.p.transact(ctx, w.tp, []byte("device-1"), Command)
	end := time.Now()
	events := w.trace.end()
	if err != nil {
		return Sample{}, fmt.Errorf("floor write: %w", err)
	}
	return Sample{D: end.Sub(start), Steps: []time.Duration{steps.added, steps.produced, steps.committed}, Requests: requestCounts(events, start, end),
		Trace: timeline(events, start, []string{"writer"})}, nil
}

// FloorWriteSteps names the steps of a FloorWrite sample.
var FloorWriteSteps = []string{"AddPartitionsToTxn answered", "Produce answered", "EndTxn answered"}

// Close closes the writer's client.
func (w *FloorWrite) Close() { w.client.Close() }

// FloorThroughput is the protocol's ceiling of commands per second for one
// role: one producer, no library code, that commits back-to-back
// transactions of perTxn records each (one Produce of one batch), as a
// leader's group commit does at best when perTxn writers wait. A
// transactional id has one transaction open at a time, and the next one's
// AddPartitionsToTxn waits (CONCURRENT_TRANSACTIONS) until the previous
// commit's markers are written, so this is what one role can commit. It
// returns the commands per second of each window; the first window warms
// up and is left out.
func (k *Kafka) FloorThroughput(ctx context.Context, perTxn, windows int, window time.Duration) ([]float64, error) {
	w, err := k.NewFloorWrite(ctx)
	if err != nil {
		return nil, err
	}
	defer w.Close()
	var rates []float64
	for i := 0; i <= windows; i++ {
		start, committed := time.Now(), 0
		for time.Since(start) < window {
			if _, err := w.p.transactRecords(ctx, w.tp, []byte("device-1"), Command, perTxn); err != nil {
				return nil, fmt.Errorf("floor throughput: %w", err)
			}
			committed += perTxn
		}
		if i > 0 {
			rates = append(rates, float64(committed)/time.Since(start).Seconds())
		}
	}
	return rates, nil
}

// FloorHandover is the floor of a handover: two members, each with its own
// client, that take turns on one role of a fresh state topic.
type FloorHandover struct {
	clients [2]*kgo.Client
	members [2]coordination.MemberID
	role    coordination.Role
	p       [2]*floorProducer
	tp      coordination.TopicPartition
	lease   time.Duration
	holder  int
	trace   tracer
	// registration makes the holder write the tombstone of its
	// registration too, as a plain record: not the floor, but the cost of
	// that second record.
	registration registrationTombstone
	// offer makes the holder write a lease that names the other member in
	// place of the tombstone: the floor of a transfer (NewFloorTransfer).
	offer bool
}

// registrationTombstone says when a floor holder writes the tombstone of its
// registration.
type registrationTombstone int

const (
	noRegistration       registrationTombstone = iota
	registrationParallel                       // with the tombstone transaction, as Leadership.Resign did until 2026-12-04
	registrationAfter                          // once the tombstone transaction committed
)

// NewFloorHandoverWithRegistration is NewFloorHandover whose holder also
// writes the tombstone of its registration, a plain record to the same
// partition, in parallel with its tombstone transaction, as
// Leadership.Resign did until it wrote that tombstone inside its tombstone
// transaction (ExtendedTransport.WriteTombstones, 2026-12-04).
func (k *Kafka) NewFloorHandoverWithRegistration(ctx context.Context) (*FloorHandover, error) {
	h, err := k.NewFloorHandover(ctx)
	if h != nil {
		h.registration = registrationParallel
	}
	return h, err
}

// NewFloorHandoverWithRegistrationAfter is NewFloorHandover whose holder
// writes the tombstone of its registration once its tombstone transaction
// committed, while the standby takes over.
func (k *Kafka) NewFloorHandoverWithRegistrationAfter(ctx context.Context) (*FloorHandover, error) {
	h, err := k.NewFloorHandover(ctx)
	if h != nil {
		h.registration = registrationAfter
	}
	return h, err
}

// plainProduce writes one record outside any transaction (acks=all).
func (f *floorProducer) plainProduce(ctx context.Context, tp coordination.TopicPartition, key, value []byte) error {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 10_000
	pt := kmsg.NewProduceRequestTopic()
	pt.Topic = tp.Topic
	pp := kmsg.NewProduceRequestTopicPartition()
	pp.Partition = int32(tp.Partition) //nolint:gosec // a partition of a topic the bench made
	pp.Records = floorBatch(-1, -1, -1, key, value)
	pt.Partitions = append(pt.Partitions, pp)
	req.Topics = append(req.Topics, pt)
	kresp, err := f.client.Broker(int(f.topics[tp.Topic].leaders[tp.Partition])).Request(ctx, req)
	if err != nil {
		return err
	}
	for _, t := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			if err := kerr.ErrorForCode(p.ErrorCode); err != nil {
				return err
			}
		}
	}
	return nil
}

// NewFloorHandover opens the two members on a fresh state topic, and lets
// the first one take the role: it mints and writes its first lease.
func (k *Kafka) NewFloorHandover(ctx context.Context) (*FloorHandover, error) {
	lease, _ := coordination.NewLeaseConfig(10*time.Second, 3*time.Second, time.Second)
	topic, _, err := k.StateTopic(ctx, "krabka-bench-floor-handover", lease)
	if err != nil {
		return nil, err
	}
	role, err := k.role(ctx, "bench-floor-handover")
	if err != nil {
		return nil, err
	}
	h := &FloorHandover{role: role, members: [2]coordination.MemberID{mustMember("a"), mustMember("b")},
		tp: coordination.TopicPartition{Topic: topic}, lease: lease.Duration()}
	for i := range h.clients {
		if h.clients[i], err = k.floorClient(h.trace.hook(i)); err != nil {
			h.Close()
			return nil, err
		}
		h.p[i] = newFloorProducer(h.clients[i], h.role.String())
		if err := h.p[i].prepare(ctx, topic); err != nil {
			h.Close()
			return nil, err
		}
	}
	if err := h.p[0].initProducerID(ctx, h.lease); err != nil {
		h.Close()
		return nil, err
	}
	key, value := floorLease(h.role, h.members[0])
	if _, err := h.p[0].transact(ctx, h.tp, key, value); err != nil {
		h.Close()
		return nil, err
	}
	return h, nil
}

// FloorHandoverSteps names the steps of a FloorHandover sample.
var FloorHandoverSteps = []string{"holder's EndTxn answered", "standby's Fetch returns", "standby's InitProducerId answered", "first lease: AddPartitionsToTxn answered", "first lease: Produce answered", "first lease: EndTxn answered"}

// Sample is one handover of the floor: once the markers of the previous
// commit are written, the standby parks a read_committed Fetch at the last
// stable offset (untimed, then 20 ms to let the broker park it), and the sample runs from the holder's first request of the
// tombstone transaction to the answer of the standby's first lease EndTxn.
func (h *FloorHandover) Sample(ctx context.Context) (Sample, error) {
	s := 1 - h.holder
	holder, standby := h.p[h.holder], h.p[s]
	lso, err := standby.settled(ctx, h.tp)
	if err != nil {
		return Sample{}, fmt.Errorf("floor handover: ListOffsets: %w", err)
	}
	type woke struct {
		at  time.Time
		err error
	}
	fetched := make(chan woke, 1)
	fetchCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	go func() { // owned by this sample, which waits for it
		// The tombstone and its commit marker, and the plain record of the
		// registration's tombstone when the holder writes it.
		until := lso + 2
		if h.registration == registrationParallel {
			until++
		}
		at, err := standby.fetchUntil(fetchCtx, h.tp, lso, until, 5*time.Second)
		fetched <- woke{at, err}
	}()
	select {
	case <-time.After(20 * time.Millisecond):
	case w := <-fetched:
		return Sample{}, fmt.Errorf("floor handover: the standby's fetch returned before the handover: %w", w.err)
	}
	key := coordination.EncodeKey(coordination.LeaseKey(h.role))
	h.trace.begin()
	defer h.trace.end()
	start := time.Now()
	// The registration's tombstone, when the holder writes one, ends on
	// its own; the sample waits for it at its end, untimed, and fails on
	// its error.
	registered := make(chan error, 1)
	pending := false
	register := func() {
		pending = true
		go func() { // owned by this sample, which waits for it
			registered <- holder.plainProduce(ctx, h.tp, coordination.EncodeKey(coordination.RegistrationKey(h.role, h.members[h.holder])), nil)
		}()
	}
	defer func() {
		if pending {
			<-registered
		}
	}()
	if h.registration == registrationParallel {
		register()
	}
	var offer []byte
	if h.offer {
		_, offer = floorLease(h.role, h.members[s])
	}
	tomb, err := holder.transact(ctx, h.tp, key, offer)
	if err != nil {
		cancel()
		<-fetched
		return Sample{}, fmt.Errorf("floor handover: tombstone: %w", err)
	}
	if h.registration == registrationAfter {
		register()
	}
	w := <-fetched
	if w.err != nil {
		return Sample{}, fmt.Errorf("floor handover: standby fetch: %w", w.err)
	}
	woken := w.at.Sub(start)
	if err := standby.initProducerID(ctx, h.lease); err != nil {
		return Sample{}, fmt.Errorf("floor handover: %w", err)
	}
	minted := time.Since(start)
	key, value := floorLease(h.role, h.members[s])
	first, err := standby.transact(ctx, h.tp, key, value)
	if err != nil {
		return Sample{}, fmt.Errorf("floor handover: first lease: %w", err)
	}
	end := time.Now()
	if pending {
		pending = false
		if err := <-registered; err != nil {
			return Sample{}, fmt.Errorf("floor handover: registration tombstone: %w", err)
		}
	}
	events := h.trace.end()
	names := make([]string, 2)
	names[h.holder], names[s] = "holder", "standby"
	h.holder = s
	return Sample{D: end.Sub(start), Steps: []time.Duration{tomb.committed, woken, minted, minted + first.added, minted + first.produced, minted + first.committed},
		Requests: requestCounts(events, start, end), Trace: timeline(events, start, names)}, nil
}

// Close closes the members' clients.
func (h *FloorHandover) Close() {
	for _, c := range h.clients {
		if c != nil {
			c.Close()
		}
	}
}
