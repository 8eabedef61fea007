package coordinationtest

import "testing"

// runExtended runs the checks of the methods of
// [coordination.ExtendedTransport] that the checks of the followers and
// of WriteGuarded leave.
func (s *suite) runExtended(t *testing.T) {
	t.Helper()
}
