package kafkawire

import (
	"context"
	"fmt"
	"slices"
)

// This file holds the fill of a selection (selection.go) that joined a
// partition which the view had already passed: one walk of the log up to
// the offset that the view had reached, keeping the records of the
// selection, merged into the view in offset order.
//
// The order makes it lose nothing: the group is selected first (Keep), so
// the fetch loop keeps its records from the view's position on; the fill
// then notes that position, under the lock, and walks the log below it;
// the merge takes of each key only a record newer than the one the view
// holds, so a record that the fetch loop added meanwhile wins over the
// walk's older one. A reset of the view during the walk (the log start
// moved past it) drops the walk: the fetch loop folds the log again from
// its start, with the selection.

// fill makes the view of p hold every record of s below the view's
// position: it returns at once when s is filled; while another read
// walks the log, it queues s for the next walk and waits; and otherwise
// it walks the log itself, under ctx, for s and every selection queued
// meanwhile, so that many groups that join at once cost one walk or two.
// A walk that fails leaves its selections unfilled, for the next read to
// try again; its errors are those of [Reader.ReadLog].
func (r *Reader) fill(ctx context.Context, p *followedPartition, s *selected) error {
	op := "read " + p.tp.String()
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return errClosed
		}
		if s.filled || !p.sel.holdsLocked(s) {
			r.mu.Unlock()
			return nil
		}
		if p.sel.walking {
			if !s.queued {
				s.queued = true
				p.sel.queue = append(p.sel.queue, s)
			}
			advanced := p.advanced
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return &Error{Op: op, Class: Canceled, Err: fmt.Errorf("%w: waiting for another read's walk of the log", ctx.Err())}
			case <-advanced:
			}
			continue
		}
		batch := p.sel.queue
		if !s.queued {
			batch = append(batch, s)
		}
		p.sel.queue = nil
		for _, b := range batch {
			b.queued = false
		}
		p.sel.walking = true
		reached, gen := p.next, p.sel.gen
		keep := r.keepOf(batch)
		r.mu.Unlock()

		records, err := r.walk(ctx, p, reached, keep)

		r.mu.Lock()
		p.sel.walking = false
		if err == nil && p.sel.gen == gen {
			r.mergeLocked(p, batch, records)
		}
		p.changedLocked() // wakes the reads that wait for the walk
		r.mu.Unlock()
		if err != nil {
			return err
		}
	}
}

// keepOf returns the filter of a walk for the selections of batch: the
// records of their groups, or every record (nil) when one of them is the
// whole partition.
func (r *Reader) keepOf(batch []*selected) func(key []byte) bool {
	groups := make(map[string]bool, len(batch))
	for _, s := range batch {
		if s.whole {
			return nil
		}
		groups[s.group] = true
	}
	return func(key []byte) bool {
		g := r.group(key)
		return g != nil && groups[string(g)]
	}
}

// mergeLocked merges the records of a walk for batch into the view of p,
// and marks filled the selections of batch that p still holds; the records
// of one that a release dropped meanwhile stay out of the view. The caller
// holds r.mu.
func (r *Reader) mergeLocked(p *followedPartition, batch []*selected, records []Record) {
	var current []*selected
	for _, s := range batch {
		if p.sel.holdsLocked(s) {
			current = append(current, s)
		}
	}
	if len(current) < len(batch) {
		if keep := r.keepOf(current); keep != nil {
			records = slices.DeleteFunc(records, func(record Record) bool { return !keep(record.Key) })
		}
	}
	p.view.Merge(records)
	for _, s := range current {
		s.filled = true
	}
}

// holdsLocked reports whether s is still a selection of the partition: a
// selection that its last hold released is not, though a new hold of its
// group makes a new one. The caller holds r.mu.
func (sel *selection) holdsLocked(s *selected) bool {
	if s.whole {
		return sel.all == s
	}
	return sel.groups[s.group] == s
}
