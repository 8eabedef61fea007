package kafkawire

import (
	"context"
	"slices"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file builds, sends and reads the read_committed Fetch requests of
// the reader: one Fetch builder, sender and partition match for the fetch
// loops and for ReadLog's walk.

// fetch issues one read_committed Fetch to a leader, in the fetch session
// sessionID at epoch, naming the partitions that include marks, and returns
// the response or the error of the request as a whole. ids are the topic
// ids of the partitions, as the loop read them under the reader's lock.
func (r *Reader) fetch(ctx context.Context, leader int32, parts []*followedPartition, offsets []int64, ids [][16]byte, include []bool,
	maxWait time.Duration, sessionID, epoch int32) (*kmsg.FetchResponse, error) {
	req := newFetchRequest(maxWait, sessionID, epoch)
	for i, p := range parts {
		if include[i] {
			addFetchPartition(req, p.tp, ids[i], offsets[i])
		}
	}
	return sendFetch(ctx, r.client, leader, req)
}

// newFetchRequest is a read_committed Fetch of a consumer (replica -1)
// with the reader's size bounds, a long poll of maxWait, and the fetch
// session sessionID at epoch (0 and -1: none, a full fetch).
func newFetchRequest(maxWait time.Duration, sessionID, epoch int32) *kmsg.FetchRequest {
	req := kmsg.NewPtrFetchRequest()
	req.ReplicaID = -1
	req.ReplicaState.ID = -1
	req.MaxWaitMillis = clampMillis32(maxWait) // readerTimings bounds it by readerMaxWaitCap
	req.MinBytes = 1
	req.MaxBytes = readerMaxBytes
	req.IsolationLevel = 1
	req.SessionID = sessionID
	req.SessionEpoch = epoch
	return req
}

// addFetchPartition adds one partition of a topic, by name and (from Fetch
// version 13 on) by topic id, at offset to req.
func addFetchPartition(req *kmsg.FetchRequest, tp Partition, topicID [16]byte, offset int64) {
	j := slices.IndexFunc(req.Topics, func(t kmsg.FetchRequestTopic) bool { return t.Topic == tp.Topic })
	if j < 0 {
		t := kmsg.NewFetchRequestTopic()
		t.Topic, t.TopicID = tp.Topic, topicID
		req.Topics = append(req.Topics, t)
		j = len(req.Topics) - 1
	}
	fp := kmsg.NewFetchRequestTopicPartition()
	fp.Partition = tp.Partition
	fp.CurrentLeaderEpoch = -1
	fp.FetchOffset = offset
	fp.LastFetchedEpoch = -1
	fp.LogStartOffset = -1
	fp.PartitionMaxBytes = readerPartitionMaxBytes
	req.Topics[j].Partitions = append(req.Topics[j].Partitions, fp)
}

// sendFetch sends req to leader over client in one attempt: a pinned
// retriable request retries a dead broker for up to 30 s (franz-go's
// RetryTimeout); the caller looks the partitions up again instead.
func sendFetch(ctx context.Context, client *kgo.Client, leader int32, req *kmsg.FetchRequest) (*kmsg.FetchResponse, error) {
	kresp, err := client.Broker(int(leader)).Request(ctx, req)
	if err != nil {
		return nil, err
	}
	resp := kresp.(*kmsg.FetchResponse)
	if err := codeError(resp.ErrorCode); err != nil {
		return nil, err
	}
	return resp, nil
}

// findFetchPartition finds the answer for tp, whose topic has topicID,
// in a Fetch response, by topic name or, from Fetch version 13 on, by
// topic id.
func findFetchPartition(resp *kmsg.FetchResponse, tp Partition, topicID [16]byte) *kmsg.FetchResponseTopicPartition {
	for i := range resp.Topics {
		t := &resp.Topics[i]
		if t.Topic != tp.Topic && (t.TopicID == [16]byte{} || t.TopicID != topicID) {
			continue
		}
		for j := range t.Partitions {
			if t.Partitions[j].Partition == tp.Partition {
				return &t.Partitions[j]
			}
		}
	}
	return nil
}
