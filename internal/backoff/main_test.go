package backoff

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine that a test started
// is still running after the last test: every goroutine has an owner that
// ends it.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
