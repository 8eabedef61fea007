package kafkawire

import "time"

// This file holds the selection of a followed partition: which of its
// records the view keeps. The fetch loop folds every committed record of
// the partition, and keeps in the view only those that a caller selected:
// the records of the key groups that the callers of [Reader.Keep] hold,
// or every record once a caller of [Reader.ReadFrom] needs the whole
// partition. A group is what the [KeyGroup] of the reader maps a key to;
// the reader knows nothing else of it. A group that joins a partition that
// the view has already passed is filled by one walk of the log
// (backfill.go) before a read of it is served, unless no record folded so
// far belongs to it (seen.go).

// KeyGroup maps a record key to the group it belongs to: bytes of the key,
// or nil for a key of no group, which only a view of the whole partition
// keeps. It must be a pure function of the key, safe for concurrent use,
// and must not keep or modify the key. [Config.KeyGroup] sets it; without
// one every view keeps the whole partition.
type KeyGroup func(key []byte) []byte

// selection is what the view of one followed partition keeps. Its fields
// are guarded by the reader's mu.
type selection struct {
	all    *selected            // set once a caller needs the whole partition, and for good
	groups map[string]*selected // the groups that callers of Keep hold, or held within the linger
	gen    int                  // counts the resets of the view, which drop a fill in flight

	walking bool        // a read walks the log to fill selections (backfill.go)
	queue   []*selected // the selections that wait for the next walk

	sweepAt time.Time // when the first lingering group leaves; zero for none
}

// selected is one group of a selection, or the whole partition.
type selected struct {
	group  string // the group, unless whole
	whole  bool   // the whole partition
	refs   int    // the callers of Keep that hold the group
	filled bool   // the view holds every record of the group below the partition's next offset
	queued bool   // in the queue of the next walk (backfill.go)

	idleSince time.Time // when the last hold ended; zero while one lasts
}

// Keep makes the view of the partition keep the records of the key groups
// from now on, and follows the partition. The view starts to keep a group
// at once; its records older than the view's position then come from one
// walk of the log, at the first read of the group ([Reader.ReadGroupsFrom]),
// unless the view keeps the whole partition already, has not fetched yet,
// or folded no record of the group so far (seen.go). release ends the
// hold: the view drops the records of a group that no caller held for the
// reader's linger (the lease duration), unless it keeps the whole
// partition, so a caller that reads the group again within it (a campaign
// that starts again after a term, a TryAcquire or a describe that polls)
// finds it filled. release is safe to call more than once. On a closed
// reader Keep does nothing, and the next read reports the error.
func (r *Reader) Keep(tp Partition, groups []string) (release func()) {
	p, err := r.follow(tp)
	if err != nil {
		return func() {}
	}
	r.mu.Lock()
	for _, g := range groups {
		r.holdLocked(p, g)
	}
	r.mu.Unlock()
	var released bool
	return func() {
		r.mu.Lock()
		defer r.mu.Unlock()
		if released {
			return
		}
		released = true
		for _, g := range groups {
			r.dropLocked(p, g)
		}
	}
}

// holdLocked adds a hold of group g on p. A group that the view starts to
// keep before its first fetch, while it keeps the whole partition, or that
// no record folded so far belongs to (seen.go), is filled already; a group
// that lingers after its last hold is taken up again as it is. The caller
// holds r.mu.
func (r *Reader) holdLocked(p *followedPartition, g string) {
	if p.sel.groups == nil {
		p.sel.groups = make(map[string]*selected)
	}
	s := p.sel.groups[g]
	if s == nil {
		s = &selected{group: g, filled: p.next == 0 || (p.sel.all != nil && p.sel.all.filled) || !p.seen.mayHold(g)}
		p.sel.groups[g] = s
	}
	s.refs++
	s.idleSince = time.Time{}
}

// dropLocked ends a hold of group g on p. The group lingers after its last
// hold, until sweepLocked drops it. The caller holds r.mu.
func (r *Reader) dropLocked(p *followedPartition, g string) {
	s := p.sel.groups[g]
	if s == nil || s.refs == 0 {
		return
	}
	if s.refs--; s.refs > 0 {
		return
	}
	if r.linger <= 0 {
		delete(p.sel.groups, g)
		r.pruneLocked(p, map[string]bool{g: true})
		return
	}
	s.idleSince = time.Now()
	if at := s.idleSince.Add(r.linger); p.sel.sweepAt.IsZero() || at.Before(p.sel.sweepAt) {
		p.sel.sweepAt = at
	}
}

// sweepLocked drops from p's selection the groups that no caller held for
// the reader's linger, and drops their records from the view unless it
// keeps the whole partition. The fetch loop calls it with every answer;
// it does the work at most once every eighth of the linger, so that the
// releases of many groups (the campaigns of a process that acquires many
// roles) cost one prune of the view, not one each. The caller holds r.mu.
func (r *Reader) sweepLocked(p *followedPartition, now time.Time) {
	if p.sel.sweepAt.IsZero() || now.Before(p.sel.sweepAt) {
		return // no group lingers past its time: the common case costs nothing
	}
	p.sel.sweepAt = time.Time{}
	var gone map[string]bool
	held := len(p.sel.groups)
	for g, s := range p.sel.groups {
		if s.refs > 0 {
			continue
		}
		if at := s.idleSince.Add(r.linger); now.Before(at) {
			if p.sel.sweepAt.IsZero() || at.Before(p.sel.sweepAt) {
				p.sel.sweepAt = at
			}
			continue
		}
		delete(p.sel.groups, g)
		if gone == nil {
			gone = make(map[string]bool)
		}
		gone[g] = true
	}
	if next := now.Add(r.linger / 8); !p.sel.sweepAt.IsZero() && p.sel.sweepAt.Before(next) {
		p.sel.sweepAt = next
	}
	if len(p.sel.groups)*2 < held {
		// A Go map keeps its buckets after its keys are deleted: a
		// selection that lost most of its groups takes a new one (not
		// maps.Clone, which keeps the size of the old).
		fresh := make(map[string]*selected, len(p.sel.groups))
		for g, s := range p.sel.groups {
			fresh[g] = s
		}
		p.sel.groups = fresh
	}
	r.pruneLocked(p, gone)
}

// pruneLocked drops the records of the groups gone from the view of p,
// unless it keeps the whole partition. The caller holds r.mu.
func (r *Reader) pruneLocked(p *followedPartition, gone map[string]bool) {
	if len(gone) == 0 || p.sel.all != nil || r.group == nil {
		return
	}
	p.view.Prune(func(key []byte) bool {
		g := r.group(key)
		return g != nil && gone[string(g)]
	})
}

// selectAllLocked makes the view of p keep the whole partition, for the
// life of the reader, and returns that selection. The caller holds r.mu.
func (r *Reader) selectAllLocked(p *followedPartition) *selected {
	if p.sel.all == nil {
		p.sel.all = &selected{whole: true, refs: 1, filled: p.next == 0 || r.group == nil}
	}
	return p.sel.all
}

// foldLocked records the group of a record that the fetch loop folds, and
// reports whether the view of p keeps the record. The caller holds r.mu.
func (r *Reader) foldLocked(p *followedPartition, key []byte) bool {
	if r.group == nil {
		return true
	}
	g := r.group(key)
	if g != nil {
		p.seen.add(g)
	}
	if p.sel.all != nil {
		return true
	}
	if g == nil {
		return false
	}
	_, ok := p.sel.groups[string(g)]
	return ok
}

// inGroups returns the filter of the records of the groups, for a read:
// nil, every record, without a KeyGroup.
func (r *Reader) inGroups(groups []string) func(key []byte) bool {
	if r.group == nil {
		return nil
	}
	if len(groups) > 4 {
		set := make(map[string]bool, len(groups))
		for _, g := range groups {
			set[g] = true
		}
		return func(key []byte) bool {
			g := r.group(key)
			return g != nil && set[string(g)]
		}
	}
	return func(key []byte) bool {
		g := r.group(key)
		if g == nil {
			return false
		}
		for _, want := range groups {
			if string(g) == want {
				return true
			}
		}
		return false
	}
}

// resetSelectionLocked records that the view of p started again from the log
// start: the fetch loop folds the whole log again, with the selection, so
// every selected group is complete once it passes the offsets it had
// reached, and a fill in flight is dropped. The caller holds r.mu.
func (p *followedPartition) resetSelectionLocked() {
	p.sel.gen++
	p.seen.reset()
	if p.sel.all != nil {
		p.sel.all.filled = true
	}
	for _, s := range p.sel.groups {
		s.filled = true
	}
}
