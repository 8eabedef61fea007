package kafkawire

// The context of an epoch (endContext): it ends once, when the epoch ends,
// and it keeps nothing for the contexts derived from it once they end.

import (
	"context"
	"slices"
	"sync"
	"time"
)

// endContext is a context without deadline or values that ends when end
// runs, with context.Canceled. It is what an [Epoch] derives the contexts
// of its requests from. It implements the AfterFunc method that package
// context looks for, so a context derived from it registers a function
// here, neither a goroutine nor an entry in a *context.cancelCtx's map of
// children, which Go allocates at the first child and never shrinks: a
// wire that holds thousands of epochs, each with a transaction now and
// then, would keep such a map for each. The functions registered here are
// dropped when their context ends, and the slice with the last of them.
// It is safe for concurrent use.
type endContext struct {
	done chan struct{}

	mu    sync.Mutex
	err   error
	funcs []*func() // registered by AfterFunc and not yet stopped
}

var _ context.Context = (*endContext)(nil)

func newEndContext() *endContext { return &endContext{done: make(chan struct{})} }

func (c *endContext) Deadline() (time.Time, bool) { return time.Time{}, false }
func (c *endContext) Done() <-chan struct{}       { return c.done }
func (c *endContext) Value(any) any               { return nil }

func (c *endContext) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// AfterFunc runs f on a goroutine of its own once the context ends (at
// once when it has); stop unregisters f, and reports whether it did so
// before f started, as context.AfterFunc's stop does.
func (c *endContext) AfterFunc(f func()) (stop func() bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.err != nil {
		go f()
		return func() bool { return false }
	}
	entry := &f
	c.funcs = append(c.funcs, entry)
	return func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		i := slices.Index(c.funcs, entry)
		if i < 0 {
			return false
		}
		c.funcs = slices.Delete(c.funcs, i, i+1)
		if len(c.funcs) == 0 {
			c.funcs = nil
		}
		return true
	}
}

// end ends the context and runs every registered function; a second call
// does nothing.
func (c *endContext) end() {
	c.mu.Lock()
	if c.err != nil {
		c.mu.Unlock()
		return
	}
	c.err = context.Canceled
	close(c.done)
	funcs := c.funcs
	c.funcs = nil
	c.mu.Unlock()
	for _, f := range funcs {
		go (*f)()
	}
}
