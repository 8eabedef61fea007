package kafkawire

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the reads and the probes of a preflight check
// (coordination's KafkaTransport.Preflight): the requests the wire sends
// with the versions it can send them at, each broker's ApiVersions, the
// brokers' and the topic's configs, and the probes of the ACLs, none of
// which changes a thing on the cluster.

// RequestNeed is one request that the wire sends, as a preflight check
// reports it: a row of the table of versions.go ([Requests]) with its API
// key as a number. Min is the oldest version with what the wire needs, Max
// the newest it sends (its own cap, else franz-go's). Optional marks a
// request that a member may never send (CreateTopics, a config read).
type RequestNeed struct {
	Key      int16
	Min, Max int16
	Optional bool
	Why      string
	// Client names the client that sends it ("transactional", "plain",
	// "reader") when the table has a row per client of this key, and is
	// empty otherwise.
	Client string
}

// Name is the request's name in Kafka's protocol (EndTxn, Fetch,
// InitProducerId), with the client that sends it when the table has
// a row per client.
func (r RequestNeed) Name() string {
	name := kmsg.NameForKey(r.Key)
	if r.Key == kmsg.InitProducerID.Int16() {
		name = "InitProducerId" // kmsg spells it InitProducerID
	}
	if r.Client != "" {
		name += " (" + r.Client + ")"
	}
	return name
}

// Requests returns the requests that the wire sends, with the versions of
// each (see [RequestNeed]), from the one table of versions.go; a request
// that several clients send at different ranges has a row for each.
func (w *Wire) Requests() []RequestNeed {
	rows := Requests(w.versions)
	perKey := map[kmsg.Key]int{}
	for _, r := range rows {
		perKey[r.Key]++
	}
	needs := make([]RequestNeed, 0, len(rows))
	for _, r := range rows {
		why := r.Why
		if r.Client != "every" {
			why = r.Client + " client: " + why
		}
		need := RequestNeed{Key: r.Key.Int16(), Min: r.Min, Max: r.Max, Optional: r.Optional, Why: why}
		if perKey[r.Key] > 1 {
			need.Client = r.Client
		}
		needs = append(needs, need)
	}
	return needs
}

// BrokerVersions is one broker's ApiVersions answer.
type BrokerVersions struct {
	ID   int32
	Host string
	Port int32
	// Ranges holds the [min, max] versions of every API key the broker
	// serves.
	Ranges map[int16][2]int16
	// Guess is franz-go's guess of the Kafka release from the ranges
	// (kversion's VersionGuess): Kafka sends no software version of its
	// own.
	Guess string
	// Finalized holds the finalized feature levels (ApiVersions v3+,
	// KIP-584), such as transaction.version; nil when the broker sends
	// none.
	Finalized map[string]int16
	// Supported holds the [min, max] of each feature the broker supports.
	Supported map[string][2]int16
	// Err is the error of the request, when it got no answer.
	Err error
}

// BrokerVersionsAll asks every broker of a fresh Metadata answer for its
// ApiVersions. It returns the brokers in id order, and an error of class
// by the Metadata request's failure only.
func (w *Wire) BrokerVersionsAll(ctx context.Context) ([]BrokerVersions, error) {
	if w.Closed() {
		return nil, errClosed
	}
	all, err := w.admin.ApiVersions(ctx)
	if err != nil {
		return nil, wrap(PathMetadata, "describe the cluster's brokers", err)
	}
	meta, err := w.admin.BrokerMetadata(ctx)
	if err != nil {
		return nil, wrap(PathMetadata, "describe the cluster's brokers", err)
	}
	out := make([]BrokerVersions, 0, len(all))
	for _, v := range all.Sorted() {
		b := BrokerVersions{ID: v.NodeID, Err: v.Err, Ranges: map[int16][2]int16{}}
		for _, d := range meta.Brokers {
			if d.NodeID == v.NodeID {
				b.Host, b.Port = d.Host, d.Port
			}
		}
		if raw := v.Raw(); raw != nil && v.Err == nil {
			v.EachKeySorted(func(key, min, max int16) { b.Ranges[key] = [2]int16{min, max} })
			b.Guess = v.VersionGuess()
			for _, f := range raw.FinalizedFeatures {
				if b.Finalized == nil {
					b.Finalized = map[string]int16{}
				}
				b.Finalized[f.Name] = f.MaxVersionLevel
			}
			for _, f := range raw.SupportedFeatures {
				if b.Supported == nil {
					b.Supported = map[string][2]int16{}
				}
				b.Supported[f.Name] = [2]int16{f.MinVersion, f.MaxVersion}
			}
		}
		out = append(out, b)
	}
	return out, nil
}

// BrokerConfig is one config of a broker: its value and where it comes
// from (configSource).
type BrokerConfig struct {
	Value  string
	Source string
}

// BrokerConfigs returns the configs named by keys of each broker, with one
// DescribeConfigs request per broker (DESCRIBE_CONFIGS on the cluster).
// A key the broker omits is absent from its map. It returns the first
// error of a request or a resource, unclassified: the caller reports it.
func (w *Wire) BrokerConfigs(ctx context.Context, brokers []int32, keys ...string) (map[int32]map[string]BrokerConfig, error) {
	out := make(map[int32]map[string]BrokerConfig, len(brokers))
	for _, broker := range brokers {
		configs, err := w.admin.DescribeBrokerConfigs(ctx, broker)
		if err != nil {
			return nil, err
		}
		got := map[string]BrokerConfig{}
		for _, config := range configs {
			if config.Err != nil {
				return nil, config.Err
			}
			for _, c := range config.Configs {
				for _, key := range keys {
					if c.Key == key && c.Value != nil {
						got[key] = BrokerConfig{Value: *c.Value, Source: configSource(c.Source)}
					}
				}
			}
		}
		out[broker] = got
	}
	return out, nil
}

// TopicFacts is what a Metadata and a DescribeConfigs answer say of a
// topic.
type TopicFacts struct {
	ID                [16]byte
	Partitions        int
	ReplicationFactor int     // the fewest replicas of any partition
	Leaders           []int32 // the leader of each partition, -1 for none
	Brokers           int     // the brokers of the cluster
	// Configs holds every config of the topic with a value, its defaults
	// included; nil with ConfigsErr set (an *Error, NotAuthorized for a
	// missing DESCRIBE_CONFIGS) when DescribeConfigs failed.
	Configs    map[string]string
	ConfigsErr error
}

// DescribeTopic reads the facts of topic. It returns an error of class
// Missing for a topic that does not exist and NotAuthorized for a
// missing DESCRIBE ACL (PathAdmin); a failed DescribeConfigs is in
// ConfigsErr.
func (w *Wire) DescribeTopic(ctx context.Context, topic string) (TopicFacts, error) {
	if w.Closed() {
		return TopicFacts{}, errClosed
	}
	op := "describe the topic " + topic
	resp, err := requestMetadata(ctx, w.plain, topic)
	if err != nil {
		return TopicFacts{}, wrap(PathAdmin, op, err)
	}
	var facts TopicFacts
	facts.Brokers = len(resp.Brokers)
	found := false
	for _, mt := range resp.Topics {
		if mt.Topic == nil || *mt.Topic != topic {
			continue
		}
		if err := codeError(mt.ErrorCode); err != nil {
			return TopicFacts{}, wrap(PathAdmin, op, err)
		}
		found = true
		facts.ID = mt.TopicID
		facts.Partitions = len(mt.Partitions)
		sort.Slice(mt.Partitions, func(i, j int) bool { return mt.Partitions[i].Partition < mt.Partitions[j].Partition })
		facts.ReplicationFactor = -1
		for _, p := range mt.Partitions {
			facts.Leaders = append(facts.Leaders, p.Leader)
			if facts.ReplicationFactor < 0 || len(p.Replicas) < facts.ReplicationFactor {
				facts.ReplicationFactor = len(p.Replicas)
			}
		}
	}
	if !found {
		return TopicFacts{}, wrap(PathAdmin, op, errMissing)
	}
	configs, err := w.admin.DescribeTopicConfigs(ctx, topic)
	if err == nil {
		var config kadm.ResourceConfig
		config, err = configs.On(topic, nil)
		if err == nil {
			err = config.Err
		}
		if err == nil {
			facts.Configs = make(map[string]string, len(config.Configs))
			for _, c := range config.Configs {
				if c.Value != nil {
					facts.Configs[c.Key] = *c.Value
				}
			}
		}
	}
	if err != nil {
		facts.ConfigsErr = wrap(PathAdmin, op+": describe its configs", err)
	}
	return facts, nil
}

// Probe is the answer of one probe of an ACL: Denied when the broker
// refused it for the ACL (the code is in Err), Err alone when the probe
// got no answer that decides (a broker down, an unexpected code), and
// neither when the broker authorized it.
type Probe struct {
	Denied bool
	Err    error
}

// probeAnswer reads the code of a probe's answer: a refusal of an ACL is
// Denied, any other code passed the authorizer, which Kafka asks first.
func probeAnswer(err error) Probe {
	switch {
	case err == nil:
		return Probe{}
	case denied(err):
		return Probe{Denied: true, Err: err}
	}
	var kafkaErr *kerr.Error
	if errors.As(err, &kafkaErr) {
		return Probe{} // the authorizer let the request through to a check behind it
	}
	return Probe{Err: err}
}

// ProbeRead tries READ on topic with a Fetch of partition 0 at offset 0,
// read_committed, with a wait of 0 ms and at most 1 byte per partition,
// sent to broker: Kafka answers TOPIC_AUTHORIZATION_FAILED without READ,
// and checks the ACL before anything else (a broker that does not lead
// the partition answers NOT_LEADER_OR_FOLLOWER after it).
func (w *Wire) ProbeRead(ctx context.Context, broker int32, topic string, id [16]byte) Probe {
	req := newFetchRequest(0, 0, -1)
	req.MaxBytes = 1
	addFetchPartition(req, Partition{Topic: topic}, id, 0)
	req.Topics[0].Partitions[0].PartitionMaxBytes = 1
	kresp, err := w.plain.Broker(int(broker)).Request(ctx, req)
	if err != nil {
		return Probe{Err: err}
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := codeError(resp.ErrorCode); err != nil {
		return probeAnswer(err)
	}
	for _, t := range resp.Topics {
		for _, p := range t.Partitions {
			return probeAnswer(codeError(p.ErrorCode))
		}
	}
	return Probe{Err: fmt.Errorf("the Fetch answer omits partition 0 of %s", topic)}
}

// ProbeWrite tries WRITE on topic with a Produce of partition 0 that
// carries no record batch (acks=all, no transactional id), sent to
// broker at version 11 at most: Kafka checks WRITE first
// (TOPIC_AUTHORIZATION_FAILED), and then refuses the empty records with
// INVALID_RECORD, so nothing is written.
func (w *Wire) ProbeWrite(ctx context.Context, broker int32, topic string, id [16]byte) Probe {
	req := kmsg.NewPtrProduceRequest()
	req.Acks = -1
	req.TimeoutMillis = 5000
	rt := kmsg.NewProduceRequestTopic()
	rt.Topic, rt.TopicID = topic, id
	rp := kmsg.NewProduceRequestTopicPartition()
	rp.Partition = 0
	rp.Records = []byte{}
	rt.Partitions = append(rt.Partitions, rp)
	req.Topics = append(req.Topics, rt)
	kresp, err := w.txn.Broker(int(broker)).Request(ctx, req) // the txn client caps Produce at 11: topic names
	if err != nil {
		return Probe{Err: err}
	}
	for _, t := range kresp.(*kmsg.ProduceResponse).Topics {
		for _, p := range t.Partitions {
			return probeAnswer(codeError(p.ErrorCode))
		}
	}
	return Probe{Err: fmt.Errorf("the Produce answer omits partition 0 of %s", topic)}
}

// ProbeTxnWrite tries WRITE on the transactional id txnID (and WRITE on
// partition's topic) with an AddPartitionsToTxn of version 3 at most under
// producer id -1 and epoch -1, sent to broker: Kafka checks WRITE on the
// transactional id first (TRANSACTIONAL_ID_AUTHORIZATION_FAILED), then on
// the topic (TOPIC_AUTHORIZATION_FAILED), and then the coordinator, which
// never minted producer id -1, refuses it (INVALID_PRODUCER_ID_MAPPING, or
// NOT_COORDINATOR from another broker) without a change: no epoch is
// minted or bumped, no transaction begins. It returns the probe of the
// transactional id and the probe of the topic, read from the answer's
// entry for partition (an answer without it is an error of both).
func (w *Wire) ProbeTxnWrite(ctx context.Context, broker int32, txnID string, partition Partition) (txn Probe, topic Probe) {
	req := kmsg.NewPtrAddPartitionsToTxnRequest()
	req.TransactionalID = txnID
	req.ProducerID, req.ProducerEpoch = -1, -1
	rt := kmsg.NewAddPartitionsToTxnRequestTopic()
	rt.Topic = partition.Topic
	rt.Partitions = []int32{partition.Partition}
	req.Topics = append(req.Topics, rt)
	kresp, err := w.txn.Broker(int(broker)).Request(ctx, req) // the txn client caps it at 3, a client's version
	if err != nil {
		return Probe{Err: err}, Probe{Err: err}
	}
	resp := kresp.(*kmsg.AddPartitionsToTxnResponse)
	if err := codeError(resp.ErrorCode); err != nil {
		p := probeAnswer(err)
		return p, Probe{Err: err}
	}
	for _, t := range resp.Topics {
		if t.Topic != partition.Topic {
			continue
		}
		for _, p := range t.Partitions {
			if p.Partition != partition.Partition {
				continue // the answer of the partition asked, not another's
			}
			err := codeError(p.ErrorCode)
			switch {
			case errors.Is(err, kerr.TransactionalIDAuthorizationFailed):
				return Probe{Denied: true, Err: err}, Probe{Err: errors.New("not probed: the transactional id was refused first")}
			case errors.Is(err, kerr.TopicAuthorizationFailed):
				return Probe{}, Probe{Denied: true, Err: err}
			}
			return probeAnswer(err), probeAnswer(err)
		}
	}
	err = fmt.Errorf("the AddPartitionsToTxn answer omits partition %d of %s", partition.Partition, partition.Topic)
	return Probe{Err: err}, Probe{Err: err}
}

// ProbeTxnDescribe tries DESCRIBE on the transactional id txnID with the
// FindCoordinator and the DescribeTransactions of DescribeEpoch, which
// change nothing. It also returns the id's state at its coordinator
// ("Empty", "Ongoing", "CompleteCommit", ...; "" when the coordinator
// knows no such id), so the caller knows whether a role is live.
func (w *Wire) ProbeTxnDescribe(ctx context.Context, txnID string) (Probe, string) {
	txn, err := w.describeTransaction(ctx, txnID)
	if err != nil {
		return probeAnswer(err), ""
	}
	if txnIDNotFound(txn.Err) {
		return Probe{}, ""
	}
	if txn.Err != nil {
		return probeAnswer(txn.Err), ""
	}
	return Probe{}, txn.State
}

// Brief names the cause of a probe's or a read's error in a few words:
// the broker's code and its text (TOPIC_AUTHORIZATION_FAILED: ...) when
// there is one, else the error's text.
func Brief(err error) string {
	var kafkaErr *kerr.Error
	if errors.As(err, &kafkaErr) {
		return kafkaErr.Message + ": " + kafkaErr.Description
	}
	return err.Error()
}

// ConfigMillis parses a config value of milliseconds; false for a value
// that is no positive count.
func ConfigMillis(value string) (int64, bool) {
	ms, err := strconv.ParseInt(value, 10, 64)
	return ms, err == nil && ms > 0
}
