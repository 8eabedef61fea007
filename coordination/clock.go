package coordination

// The clock: the Clock seam, SystemClock, ManualClock, the monotonic
// reading of a Clock (monoMillis), and a context bounded on a Clock
// (withClockTimeout).

import (
	"context"
	"sync"
	"time"
)

// Clock is the source of the current time, and the source of every wait.
//
// The succession rules and the lease clock take an instant as a parameter,
// so they need no clock at all. This interface is the seam for the code
// around them that reads a real clock and that waits. A test supplies
// *[ManualClock], drives time by hand, and sleeps for nothing.
//
// The package measures its own waits, timeouts and deadlines on a monotonic
// reading, so that a step of the wall clock moves none of them:
// [SystemClock]'s is Go's monotonic clock, [ManualClock]'s is its one
// reading, and a Clock that embeds either has theirs. A Clock of another
// type is measured through NowMillis (see "Clock assumptions" in the
// package documentation).
//
// An implementation is safe for concurrent use: a leadership reads it from
// its own goroutine.
type Clock interface {
	// NowMillis returns the current time, in milliseconds since the Unix
	// epoch.
	NowMillis() int64

	// After returns a channel that receives one value after the extent
	// passes. An extent at or below zero receives at once.
	After(extent time.Duration) <-chan time.Time
}

// SystemClock reads the clock of the host. It is the clock that
// [AcquireLeadership] takes by default. The zero value is ready, and it is
// safe for concurrent use.
type SystemClock struct{}

// NowMillis returns the host time, in milliseconds since the Unix epoch.
func (SystemClock) NowMillis() int64 { return time.Now().UnixMilli() }

// After returns a channel that receives one value after the extent passes.
// An extent at or below zero receives at once.
func (SystemClock) After(extent time.Duration) <-chan time.Time {
	if extent <= 0 {
		ch := make(chan time.Time, 1)
		ch <- time.Now()
		return ch
	}
	return time.After(extent)
}

// processStart is the origin of SystemClock's monotonic reading.
var processStart = time.Now()

// monoMillis is SystemClock's monotonic reading: the wall time at which
// the process started plus the time since, measured on the monotonic clock
// that Go's time.Time carries, so a step of the host's wall clock (NTP, a
// VM restore) does not move it. (Inside a synctest bubble, whose time has
// no monotonic reading, it is the bubble's time.) It is above zero.
func (SystemClock) monoMillis() int64 {
	return processStart.UnixMilli() + time.Since(processStart).Milliseconds()
}

// monotonicClock is a Clock with a monotonic reading besides NowMillis.
// SystemClock and ManualClock have one, and so does a Clock that embeds
// either of them.
type monotonicClock interface {
	monoMillis() int64
}

// monoMillis reads clock's monotonic instant, in milliseconds from an
// origin of its own: the reading on which every wait, timeout and deadline
// of the local process is measured (renewal_scheduler.go, the renew
// deadline, the preemption of a write). Wall-clock milliseconds
// (NowMillis) are only for the instants the specification puts in records
// and for Evaluate's inputs. A Clock without a monotonic reading (neither
// SystemClock nor ManualClock, nor embedding either) is read through
// NowMillis, as before.
func monoMillis(clock Clock) int64 {
	if m, ok := clock.(monotonicClock); ok {
		return m.monoMillis()
	}
	return clock.NowMillis()
}

// ManualClock is a clock that a test moves by hand. A wait that
// [ManualClock.After] returns receives when [ManualClock.Set] or
// [ManualClock.Advance] moves the clock to the instant of the wait.
//
// The clock is safe for concurrent use, so a test shares one clock between a
// holder and its challengers and moves them all together.
// [ManualClock.BlockUntil] lets a test move the clock only after the code
// under test has parked on it, so no test sleeps.
type ManualClock struct {
	mu      sync.Mutex
	now     int64
	waits   []manualWait
	changed chan struct{} // closed and replaced whenever waits grows
}

type manualWait struct {
	at int64
	ch chan time.Time
}

// NewManualClock builds a clock that reads this instant, in milliseconds
// since the Unix epoch.
func NewManualClock(nowMillis int64) *ManualClock {
	return &ManualClock{now: nowMillis, changed: make(chan struct{})}
}

// NowMillis returns the instant the clock reads now, in milliseconds since
// the Unix epoch.
func (c *ManualClock) NowMillis() int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// monoMillis is the clock's own reading: a test moves both readings
// together, and a test clock that embeds ManualClock and steps its
// NowMillis keeps this one.
func (c *ManualClock) monoMillis() int64 { return c.NowMillis() }

// After returns a channel that receives when the clock reaches the instant
// this extent names, rounded up to a whole millisecond. A wait that is
// already due receives at once.
func (c *ManualClock) After(extent time.Duration) <-chan time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	ch := make(chan time.Time, 1)
	at := addMillis(c.now, extent)
	if at <= c.now {
		ch <- time.UnixMilli(c.now)
		return ch
	}
	c.waits = append(c.waits, manualWait{at: at, ch: ch})
	close(c.changed)
	c.changed = make(chan struct{})
	return ch
}

// Set moves the clock to this instant, in milliseconds since the Unix
// epoch, and releases every wait that the move makes due. It moves the clock
// backwards too, and a backwards move releases nothing.
func (c *ManualClock) Set(nowMillis int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = nowMillis
	kept := c.waits[:0]
	for _, w := range c.waits {
		if w.at <= nowMillis {
			w.ch <- time.UnixMilli(nowMillis)
			continue
		}
		kept = append(kept, w)
	}
	clear(c.waits[len(kept):])
	c.waits = kept
}

// Advance moves the clock forward by this extent, rounded up to a whole
// millisecond, and releases every wait that the move makes due.
func (c *ManualClock) Advance(step time.Duration) {
	c.mu.Lock()
	next := addMillis(c.now, step)
	c.mu.Unlock()
	c.Set(next)
}

// Waiters returns the number of waits that are not due yet. A wait that its
// caller abandoned still counts until the clock reaches it.
func (c *ManualClock) Waiters() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.waits)
}

// BlockUntil blocks until at least n waits are pending, so a test moves the
// clock only after every goroutine it drives has parked on the clock. It
// returns at once when n waits are already pending.
func (c *ManualClock) BlockUntil(n int) {
	for {
		c.mu.Lock()
		pending, changed := len(c.waits), c.changed
		c.mu.Unlock()
		if pending >= n {
			return
		}
		<-changed
	}
}

// withClockTimeout is context.WithTimeout on clock (a campaign's or a
// leadership's), so that a test that drives a ManualClock drives the bound
// too. The context ends
// with context.DeadlineExceeded as its error when the extent passes on
// clock. Its goroutine ends when the context ends; the caller calls cancel.
func withClockTimeout(parent context.Context, clock Clock, extent time.Duration) (context.Context, context.CancelFunc) {
	if _, system := clock.(SystemClock); system {
		return context.WithTimeout(parent, extent)
	}
	ctx, cancel := context.WithCancelCause(parent)
	expired := clock.After(extent)
	go func() {
		select {
		case <-expired:
			cancel(context.DeadlineExceeded)
		case <-ctx.Done():
		}
	}()
	return &deadlineContext{ctx}, func() { cancel(context.Canceled) }
}

// deadlineContext reports the cause of its end as its error, so that a
// bound that passed on a ManualClock reads as context.DeadlineExceeded.
type deadlineContext struct{ context.Context }

func (c *deadlineContext) Err() error {
	if c.Context.Err() == nil {
		return nil
	}
	return context.Cause(c.Context)
}
