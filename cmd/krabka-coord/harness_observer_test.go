package main

// The observer of the watch tests: coordination.Observe of a role over a
// log and a clock of the test, in a synctest bubble, and the events that
// eventOf makes of its changes.

import (
	"context"
	"slices"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// logReader is a state partition that a test appends to, read by polls:
// every read returns every record, as a reader after compaction repeats
// the records that an observer folded already.
type logReader struct {
	mu      sync.Mutex
	records []coordination.StateRecord
}

func (r *logReader) ReadPartition(context.Context, coordination.TopicPartition) ([]coordination.StateRecord, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.records), nil
}

func (r *logReader) add(records ...coordination.StateRecord) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.records = append(r.records, records...)
}

// eventFeed is what watch does with a role, on a log and a clock of the
// test: coordination.Observe of the role, under the heartbeat interval of
// view, and each change as eventOf makes it an event. It runs in a
// synctest bubble, so that the clock moves only after the observer
// parked.
type eventFeed struct {
	t      *testing.T
	log    *logReader
	clock  *coordination.ManualClock
	cancel context.CancelFunc
	done   chan struct{}

	mu     sync.Mutex
	states []coordination.RoleChange // the ChangeState of the role
	events []roleEvent               // since the last take
}

// startFeed starts the observation at the instant startMillis, with the
// records the log holds then.
func startFeed(t *testing.T, role coordination.Role, view coordination.LeaseConfig, startMillis int64, records ...coordination.StateRecord) *eventFeed {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	f := &eventFeed{t: t, log: &logReader{records: records}, clock: coordination.NewManualClock(startMillis), cancel: cancel, done: make(chan struct{})}
	options := []coordination.Option{coordination.WithClock(f.clock), coordination.WithPollInterval(10 * time.Millisecond),
		coordination.WithHeartbeatInterval(watchHeartbeat(view))}
	go func() {
		defer close(f.done)
		for change, err := range coordination.Observe(ctx, f.log, []coordination.Role{role}, options...) {
			if err != nil {
				t.Errorf("Observe: %v", err)
				continue
			}
			f.mu.Lock()
			if change.Kind == coordination.ChangeState {
				f.states = append(f.states, change)
			}
			if event, ok := eventOf(change, view); ok {
				f.events = append(f.events, event)
			}
			f.mu.Unlock()
		}
	}()
	synctest.Wait()
	return f
}

// at moves the clock to the instant, lets the observer read and judge
// the deadlines, and returns the events since the last call.
func (f *eventFeed) at(millis int64) []roleEvent {
	f.clock.Set(millis)
	synctest.Wait()
	return f.take()
}

func (f *eventFeed) take() []roleEvent {
	f.mu.Lock()
	defer f.mu.Unlock()
	events := f.events
	f.events = nil
	return events
}

func (f *eventFeed) stop() {
	f.cancel()
	<-f.done
}
