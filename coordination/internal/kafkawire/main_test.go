package kafkawire

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine that a test started
// is still running after the last test: every goroutine of a Wire, a
// Reader's fetch loops, an epoch's background end or a Consumer has an
// owner that ends it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
