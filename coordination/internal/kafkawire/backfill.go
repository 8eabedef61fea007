package kafkawire

import (
	"context"
	"fmt"
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
// position: it returns at once when s is filled, waits while another read
// fills it, and otherwise walks the log itself, under ctx, keeping the
// records that keep reports (every record for nil). A walk that fails
// leaves s unfilled, for the next read to try again; its errors are those
// of [Reader.ReadLog].
func (r *Reader) fill(ctx context.Context, p *followedPartition, s *selected, keep func(key []byte) bool) error {
	op := "read " + p.tp.String()
	for {
		r.mu.Lock()
		if r.closed {
			r.mu.Unlock()
			return errClosed
		}
		if s.filled {
			r.mu.Unlock()
			return nil
		}
		if s.filling {
			advanced := p.advanced
			r.mu.Unlock()
			select {
			case <-ctx.Done():
				return &Error{Op: op, Class: Canceled, Err: fmt.Errorf("%w: waiting for another read's walk of the log", ctx.Err())}
			case <-advanced:
			}
			continue
		}
		s.filling = true
		reached, gen := p.next, p.sel.gen
		r.mu.Unlock()

		records, err := r.walk(ctx, p, reached, keep)

		r.mu.Lock()
		s.filling = false
		current := p.sel.gen == gen && p.sel.holdsLocked(s)
		if err == nil && current {
			p.view.Merge(records)
			s.filled = true
		}
		p.changedLocked() // wakes the reads that wait for the fill
		r.mu.Unlock()
		if err != nil {
			return err
		}
		// A reset during the walk marked s filled; a selection released
		// during the walk is not s any more, and the caller's read selects
		// it again.
		if !current {
			return nil
		}
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
