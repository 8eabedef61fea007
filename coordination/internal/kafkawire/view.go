package kafkawire

import (
	"cmp"
	"slices"
)

// This file holds the compacted view of a partition: the newest record of
// every key, as Kafka's log compaction folds a topic (by key bytes), kept
// in offset order so that a read from an offset copies only what is
// newer.

// View is the compacted view of one partition: for every key the record of
// the highest offset that was added, in offset order. The zero View is
// empty and ready to use. It is not safe for concurrent use; the
// [Reader] guards each view with its lock.
type View struct {
	index map[string]int // the position in log of the newest record of every key
	log   []viewRecord   // the records of index in offset order, and superseded ones
	dead  int            // superseded records in log
}

// viewRecord is one record of a view. Its key is the string that also
// keys index, so the view stores the bytes of a key once. A record that a
// newer record of its key superseded stays in the log, dead, until the
// next compaction of the log.
type viewRecord struct {
	offset    int64
	key       string
	value     []byte
	timestamp int64 // the record's timestamp, in ms since the Unix epoch
	dead      bool
}

// Add folds one record into the view: O(1), amortised over the
// compactions of the log. The records go in offset order. The view keeps
// value as it is (the caller hands over a copy), and a copy of key.
func (v *View) Add(offset int64, key, value []byte, timestamp int64) {
	if v.index == nil {
		v.index = make(map[string]int)
	}
	k := string(key)
	if i, ok := v.index[k]; ok {
		v.log[i] = viewRecord{offset: v.log[i].offset, dead: true}
		v.dead++
	}
	v.index[k] = len(v.log)
	v.log = append(v.log, viewRecord{offset: offset, key: k, value: value, timestamp: timestamp})
	if v.dead > 1024 && v.dead > len(v.log)/2 {
		live := make([]viewRecord, 0, len(v.log)-v.dead)
		for _, r := range v.log {
			if !r.dead {
				v.index[r.key] = len(live)
				live = append(live, r)
			}
		}
		v.log, v.dead = live, 0
	}
}

// Last returns the offset of the last record added, and false for an
// empty view.
func (v *View) Last() (int64, bool) {
	if len(v.log) == 0 {
		return 0, false
	}
	return v.log[len(v.log)-1].offset, true
}

// Reset empties the view.
func (v *View) Reset() {
	clear(v.index)
	v.log, v.dead = nil, 0
}

// Records copies the records of the view at offsets from `from` on, in
// offset order, with their keys (nil for an empty key), values and
// timestamps; with keep set, only the records whose key it keeps. It
// costs a binary search and the records it visits, so an incremental read
// of a waiting member costs its new records, not the partition.
func (v *View) Records(from int64, keep func(key []byte) bool) []Record {
	i, _ := slices.BinarySearchFunc(v.log, from, func(r viewRecord, offset int64) int { return cmp.Compare(r.offset, offset) })
	records := make([]Record, 0, len(v.log)-i)
	for _, record := range v.log[i:] {
		if record.dead {
			continue
		}
		var key []byte
		if record.key != "" {
			key = []byte(record.key)
		}
		if keep != nil && !keep(key) {
			continue
		}
		records = append(records, Record{Offset: record.offset, Key: key, Value: slices.Clone(record.value), Timestamp: record.timestamp})
	}
	return records
}

// Len returns the number of records the view holds: one per key.
func (v *View) Len() int { return len(v.log) - v.dead }

// Merge folds older records into the view: records of a walk of the log
// (oldest first) that the view may not hold, such as those of keys that
// the view starts to keep after it had already passed them. A record goes
// in unless the view holds a record of its key at the same or a higher
// offset; of several records of one key only the newest counts. The view
// keeps the records' values as they are. It costs the view and the
// records once: the log is rebuilt in offset order.
func (v *View) Merge(records []Record) {
	if len(records) == 0 {
		return
	}
	if v.index == nil {
		v.index = make(map[string]int)
	}
	newest := make(map[string]int, len(records)) // the position in records of the newest record of every key
	for i, record := range records {
		newest[string(record.Key)] = i
	}
	var in []viewRecord
	for i, record := range records {
		k := string(record.Key)
		if newest[k] != i {
			continue
		}
		if j, ok := v.index[k]; ok {
			if v.log[j].offset >= record.Offset {
				continue
			}
			v.log[j] = viewRecord{offset: v.log[j].offset, dead: true}
			v.dead++
		}
		in = append(in, viewRecord{offset: record.Offset, key: k, value: record.Value, timestamp: record.Timestamp})
	}
	if len(in) == 0 {
		return
	}
	slices.SortFunc(in, func(a, b viewRecord) int { return cmp.Compare(a.offset, b.offset) })
	merged := make([]viewRecord, 0, len(v.log)-v.dead+len(in))
	i := 0
	for _, r := range v.log {
		if r.dead {
			continue
		}
		for i < len(in) && in[i].offset < r.offset {
			merged = append(merged, in[i])
			i++
		}
		merged = append(merged, r)
	}
	merged = append(merged, in[i:]...)
	v.rebuild(merged)
}

// Prune removes the records whose key drop reports, such as those of keys
// that no caller keeps any more. It costs the view once.
func (v *View) Prune(drop func(key []byte) bool) {
	live := make([]viewRecord, 0, len(v.log)-v.dead)
	removed := false
	for _, r := range v.log {
		if r.dead {
			continue
		}
		if drop([]byte(r.key)) {
			removed = true
			continue
		}
		live = append(live, r)
	}
	if removed || v.dead > 0 {
		if cap(live) > 2*len(live) {
			live = slices.Clip(slices.Clone(live)) // the records of the roles that went, given back
		}
		v.rebuild(live)
	}
}

// rebuild makes log, which holds no dead record, the log of the view, and
// indexes it again.
func (v *View) rebuild(log []viewRecord) {
	// A Go map keeps its buckets after its keys are deleted: an index that
	// loses most of its keys (the roles that a process no longer follows)
	// is made anew at the size of the log.
	if v.index == nil || len(v.index) > 2*len(log) {
		v.index = make(map[string]int, len(log))
	} else {
		clear(v.index)
	}
	for i, r := range log {
		v.index[r.key] = i
	}
	v.log, v.dead = log, 0
}
