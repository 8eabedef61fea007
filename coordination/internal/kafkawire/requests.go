package kafkawire

import (
	"context"
	"fmt"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the two raw requests of reads and topic admin, each
// written once: ListOffsets and Metadata. kadm answers both from
// franz-go's metadata cache (kadm.ListEndOffsets maps the partitions to
// their leaders with a metadata request of its own whenever the cache is
// older than the metadata min age), and a read needs a fresh answer, from
// a leader that the reader already knows.

// Special timestamps and isolation levels of a ListOffsets request.
const (
	listLatest               int64 = -1 // the high watermark, or the last stable offset under read_committed
	listEarliest             int64 = -2 // the log start offset
	isolationReadUncommitted int8  = 0
	isolationReadCommitted   int8  = 1
)

// listOffsets lists one offset of each of the partitions of topic with one
// ListOffsets request: timestamp listLatest with isolationReadCommitted is
// the last stable offset, listLatest with isolationReadUncommitted the
// high watermark, listEarliest the log start offset. It sends the request
// to broker, or through franz-go's sharded request, which maps every
// partition to its leader, for broker -1.
//
// It returns the offset of every partition, or the error of the request,
// the first broker code of a partition, or an error for a partition that
// the response omits.
func listOffsets(ctx context.Context, client *kgo.Client, broker int32, topic string, partitions []int32, timestamp int64, isolation int8) (map[int32]int64, error) {
	req := kmsg.NewPtrListOffsetsRequest()
	req.ReplicaID = -1
	req.IsolationLevel = isolation
	rt := kmsg.NewListOffsetsRequestTopic()
	rt.Topic = topic
	for _, partition := range partitions {
		rp := kmsg.NewListOffsetsRequestTopicPartition()
		rp.Partition, rp.Timestamp, rp.CurrentLeaderEpoch = partition, timestamp, -1
		rt.Partitions = append(rt.Partitions, rp)
	}
	req.Topics = append(req.Topics, rt)
	var resp kmsg.Response
	var err error
	if broker >= 0 {
		// One attempt: a pinned retriable request retries a dead broker
		// for up to 30 s (franz-go's RetryTimeout); the caller asks
		// whoever leads the partition next.
		resp, err = client.Broker(int(broker)).Request(ctx, req)
	} else {
		resp, err = client.Request(ctx, req)
	}
	if err != nil {
		return nil, err
	}
	offsets := make(map[int32]int64, len(partitions))
	for _, t := range resp.(*kmsg.ListOffsetsResponse).Topics {
		if t.Topic != topic {
			continue
		}
		for _, p := range t.Partitions {
			if err := codeError(p.ErrorCode); err != nil {
				return nil, err
			}
			offsets[p.Partition] = p.Offset
		}
	}
	for _, partition := range partitions {
		if _, ok := offsets[partition]; !ok {
			return nil, fmt.Errorf("the ListOffsets response omits partition %d of topic %s", partition, topic)
		}
	}
	return offsets, nil
}

// requestMetadata sends one Metadata request for topics, which the broker
// answers from its own metadata, never from franz-go's cache. It returns
// the response, or the error of the request; the caller reads the codes of
// the topics and partitions.
func requestMetadata(ctx context.Context, client *kgo.Client, topics ...string) (*kmsg.MetadataResponse, error) {
	req := kmsg.NewPtrMetadataRequest()
	for _, topic := range topics {
		rt := kmsg.NewMetadataRequestTopic()
		rt.Topic = kmsg.StringPtr(topic)
		req.Topics = append(req.Topics, rt)
	}
	resp, err := client.Request(ctx, req)
	if err != nil {
		return nil, err
	}
	return resp.(*kmsg.MetadataResponse), nil
}
