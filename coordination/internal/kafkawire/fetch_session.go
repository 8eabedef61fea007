package kafkawire

import (
	"math"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// This file holds the client side of a fetch session (KIP-227), one per
// leader loop of the reader.

// fetchSession is the client side of the incremental fetch session
// (KIP-227) of one leader loop of the reader. The broker keeps the
// partitions of the session and their fetch offsets, so a request names
// only the partitions whose offset moved, and a response carries only the
// partitions with something new: records, a moved high watermark, last
// stable offset or log start, or an error. An idle long poll is then about
// 20 bytes each way instead of about 80.
//
// A request with epoch 0 is a full fetch: it names every partition, closes
// the session of its id (if any), and opens a new one. Each answer moves
// the epoch by one. A request that got no answer (it failed, or the loop
// abandoned it) leaves the broker's epoch unknown, so the next request is a
// full one; so is a request for another set of partitions than the
// session's. A broker whose session cache is full answers with session id
// 0, and the loop then fetches without a session. Its methods are called
// by the goroutine of its loop only.
type fetchSession struct {
	id      int32                      // 0 for none
	epoch   int32                      // of the next request: 0 opens a session
	offsets map[sessionPartition]int64 // the fetch offset of each partition of the session at the broker
}

// sessionPartition is a partition of a session under its topic id: a topic
// deleted and created again under the session is another topic, which
// the next request names in a full fetch.
type sessionPartition struct {
	tp Partition
	id [16]byte
}

// plan returns the session id and epoch of the next request of the
// partitions at the offsets under their topic ids, and which partitions it
// names.
func (s *fetchSession) plan(parts []*followedPartition, offsets []int64, ids [][16]byte) (id, epoch int32, include []bool) {
	include = make([]bool, len(parts))
	full := s.epoch == 0 || len(s.offsets) != len(parts)
	for i, p := range parts {
		held, ok := s.offsets[sessionPartition{p.tp, ids[i]}]
		if !ok {
			full = true
		}
		include[i] = !ok || held != offsets[i]
	}
	if full {
		s.epoch = 0
		for i := range include {
			include[i] = true
		}
	}
	return s.id, s.epoch, include
}

// answered takes the session id of an answer to a request of plan with the
// given epoch, and reports whether the answer is incremental: a partition
// of the request that it leaves out has nothing new.
func (s *fetchSession) answered(resp *kmsg.FetchResponse, epoch int32, parts []*followedPartition, offsets []int64, ids [][16]byte) (incremental bool) {
	if resp.SessionID == 0 {
		// No session: the broker has no room, or predates KIP-227. The
		// next request asks for one again.
		s.id, s.epoch, s.offsets = 0, 0, nil
		return false
	}
	if epoch == 0 || s.offsets == nil {
		s.offsets = make(map[sessionPartition]int64, len(parts))
	}
	for i, p := range parts {
		s.offsets[sessionPartition{p.tp, ids[i]}] = offsets[i]
	}
	s.id = resp.SessionID
	if epoch == math.MaxInt32 {
		s.epoch = 1
	} else {
		s.epoch = epoch + 1
	}
	return epoch > 0
}

// reset makes the next request a full fetch, which closes the session at
// the broker and opens a new one. It follows a request without an answer,
// and the refusals FETCH_SESSION_ID_NOT_FOUND and
// INVALID_FETCH_SESSION_EPOCH.
func (s *fetchSession) reset() {
	s.epoch, s.offsets = 0, nil
}
