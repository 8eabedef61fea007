package coordination

// The renewal scheduler: the one goroutine per transport and Clock that
// serves the due instants of every leadership on them (its renewals, and
// the ends of WithRenewDeadline), and runs each due renewal on a bounded pool. A
// process that holds many roles then has a goroutine count that does not
// grow with them. What a renewal does is leadership_renewal.go.

import (
	"container/heap"
	"reflect"
	"sync"
	"time"
)

// maxRenewalsInFlight bounds the renewal attempts of one scheduler that run
// at once. A due renewal past it waits for one of them to end; the others
// stay on their instants. 10 000 roles with the default renew interval
// renew 1 000 times a second; on a loaded broker a renewal's three round
// trips took 250 to 400 ms in the bench of issue 19, so a bound of 256
// let the renewals fall behind (oldest 14 s and growing), and 1024 kept
// them on time (oldest 10.5 s). Each attempt in flight is two goroutines
// (its own and its transaction's) until it ends.
const maxRenewalsInFlight = 1024

// scheduledTask is one due instant of a leadership in a scheduler's heap.
// The scheduler runs fn once the clock reaches at: on the pool when pooled
// (a renewal, which waits for the broker), on its own goroutine otherwise
// (a check that never blocks). Its fields belong to the scheduler's lock;
// index is -1 while the task is not queued.
type scheduledTask struct {
	at     int64 // ms on the monotonic reading of the scheduler's clock (monoMillis)
	index  int
	pooled bool
	fn     func()
}

// taskHeap is a min-heap of tasks by instant (container/heap).
type taskHeap []*scheduledTask

func (h taskHeap) Len() int           { return len(h) }
func (h taskHeap) Less(i, j int) bool { return h[i].at < h[j].at }
func (h taskHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *taskHeap) Push(x any) {
	t := x.(*scheduledTask)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *taskHeap) Pop() any {
	old := *h
	t := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	t.index = -1
	return t
}

// renewalScheduler serves the due instants of every leadership over one
// transport on one clock. It waits on that clock, so a test's ManualClock
// drives it, and reads the clock's monotonic instant (monoMillis), so a
// step of the wall clock neither delays nor hastens a renewal. (Keyed by the transport too, so that the leaderships of two
// synctest bubbles, each with its own transport, never share one.) Its goroutine runs while a task is queued and exits when none is;
// the next queued task starts it again. Its users are the leaderships whose
// renewals have not ended; the registry forgets the scheduler when the
// last of them leaves.
type renewalScheduler struct {
	clock Clock
	key   schedulerKey
	keyed bool // in schedulers; false when the key is no map key

	mu      sync.Mutex
	tasks   taskHeap
	running bool          // the goroutine runs
	armedAt int64         // the instant the goroutine waits for
	wake    chan struct{} // a task earlier than armedAt was queued
	users   int           // under schedulers.mu

	slots chan struct{} // the pool: one token per attempt in flight
	timer *time.Timer   // the wait of a SystemClock, reused
}

// schedulerKey names a scheduler: a transport and a clock.
type schedulerKey struct {
	transport Transport
	clock     Clock
}

// schedulers holds one scheduler per transport and Clock value, for as
// long as a leadership uses it.
var schedulers = struct {
	mu sync.Mutex
	m  map[schedulerKey]*renewalScheduler
}{m: make(map[schedulerKey]*renewalScheduler)}

// schedulerFor returns the scheduler of transport and clock, and counts one
// more user of it; the user calls release when its renewals have ended. A
// transport or clock whose dynamic type is not comparable cannot key the
// registry: its leadership gets a scheduler of its own.
func schedulerFor(transport Transport, clock Clock) *renewalScheduler {
	key := schedulerKey{transport, clock}
	schedulers.mu.Lock()
	defer schedulers.mu.Unlock()
	s, keyed := lookupScheduler(key)
	if s == nil {
		s = &renewalScheduler{clock: clock, wake: make(chan struct{}, 1), slots: make(chan struct{}, maxRenewalsInFlight)}
		if keyed {
			s.key, s.keyed = key, true
			schedulers.m[key] = s
		}
	}
	s.users++
	return s
}

// lookupScheduler finds the scheduler of key; keyed is false when the key
// cannot be a map key: a transport or a clock whose dynamic value is not
// comparable (a map lookup of it would panic). The caller holds
// schedulers.mu.
func lookupScheduler(key schedulerKey) (s *renewalScheduler, keyed bool) {
	if !reflect.ValueOf(key.transport).Comparable() || !reflect.ValueOf(key.clock).Comparable() {
		return nil, false
	}
	return schedulers.m[key], true
}

// release ends one user of the scheduler; the registry forgets a
// scheduler that has none left.
func (s *renewalScheduler) release() {
	schedulers.mu.Lock()
	defer schedulers.mu.Unlock()
	s.users--
	if s.users == 0 && s.keyed && schedulers.m[s.key] == s {
		delete(schedulers.m, s.key)
	}
}

// schedule queues t at instant at (monoMillis of the scheduler's clock), or moves it there when it is queued
// already, and starts the goroutine when it does not run.
func (s *renewalScheduler) schedule(t *scheduledTask, at int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t.at = at
	if t.index >= 0 {
		heap.Fix(&s.tasks, t.index)
	} else {
		heap.Push(&s.tasks, t)
	}
	switch {
	case !s.running:
		s.running = true
		go s.run()
	case at < s.armedAt:
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// cancel takes t off the queue; a task that is not queued (never, or
// already taken to run) stays as it is. When the queue is left empty it
// wakes the goroutine, which then exits instead of waiting on the clock
// for a task that is gone. A nil task is none.
func (s *renewalScheduler) cancel(t *scheduledTask) {
	if t == nil {
		return // a task never made (the renew deadline of a leadership without one)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if t.index < 0 {
		return
	}
	heap.Remove(&s.tasks, t.index)
	if len(s.tasks) == 0 && s.running {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// run is the scheduler's goroutine: it waits on the clock for the earliest
// task, runs every task that is due, and exits when the queue is empty.
func (s *renewalScheduler) run() {
	for {
		s.mu.Lock()
		if len(s.tasks) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		now := monoMillis(s.clock)
		next := s.tasks[0]
		if next.at > now {
			s.armedAt = next.at
			s.mu.Unlock()
			s.wait(time.Duration(next.at-now) * time.Millisecond)
			continue
		}
		heap.Pop(&s.tasks)
		s.armedAt = now
		s.mu.Unlock()
		if !next.pooled {
			next.fn()
			continue
		}
		s.slots <- struct{}{} // waits while the pool is full
		fn := next.fn
		go func() {
			defer func() { <-s.slots }()
			fn()
		}()
	}
}

// wait returns after extent on the clock, or earlier when a task earlier
// than the one it waits for is queued.
func (s *renewalScheduler) wait(extent time.Duration) {
	var due <-chan time.Time
	if _, system := s.clock.(SystemClock); system {
		if s.timer == nil {
			s.timer = time.NewTimer(extent)
		} else {
			s.timer.Reset(extent)
		}
		due = s.timer.C
		defer s.timer.Stop()
	} else {
		due = s.clock.After(extent)
	}
	select {
	case <-due:
	case <-s.wake:
	}
}
