package kafkawire

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestEndContext: a context derived from an endContext ends when it does,
// with the cause of the end; a derived context that ends first leaves
// nothing registered; AfterFunc on an ended context runs at once.
func TestEndContext(t *testing.T) {
	c := newEndContext()
	if c.Err() != nil {
		t.Fatalf("Err = %v before the end", c.Err())
	}
	for range 3 {
		child, cancel := context.WithTimeout(c, time.Hour)
		stop := context.AfterFunc(c, func() {})
		cancel()
		stop()
		if child.Err() == nil {
			t.Fatal("the child did not end with its cancel")
		}
	}
	c.mu.Lock()
	left := len(c.funcs)
	c.mu.Unlock()
	if left != 0 {
		t.Fatalf("%d functions left registered after their contexts ended", left)
	}

	child, cancel := context.WithCancel(c)
	defer cancel()
	ran := make(chan struct{})
	context.AfterFunc(c, func() { close(ran) })
	c.end()
	c.end()
	<-child.Done()
	<-ran
	if !errors.Is(child.Err(), context.Canceled) || !errors.Is(c.Err(), context.Canceled) {
		t.Fatalf("Err = %v, child's %v; want context.Canceled", c.Err(), child.Err())
	}
	late := make(chan struct{})
	if context.AfterFunc(c, func() { close(late) })() {
		t.Fatal("stop of a function on an ended context reported that it stopped it")
	}
	<-late
}
