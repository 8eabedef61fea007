package coordination

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// TestKafkaErrorAbandonedTransactionOnlyForTheCallsOwnContext: an error
// of class OutcomeUnknown, not Ended and without Detail, reads as a call
// that gave up on its transaction in flight only when its cause is the
// call's context's. A cause that holds an error of kafkawire, directly or
// wrapped, is a later call's and is rendered as such, not as a context
// that ended.
func TestKafkaErrorAbandonedTransactionOnlyForTheCallsOwnContext(t *testing.T) {
	const abandoned = "the call's context ended"
	own := kafkaError(&kafkawire.Error{Op: "lease write", Class: kafkawire.OutcomeUnknown, Err: context.DeadlineExceeded})
	if !strings.Contains(own.Error(), abandoned) || !errors.Is(own, ErrOutcomeUnknown) || !errors.Is(own, context.DeadlineExceeded) {
		t.Errorf("the call's own context: %v, want %q, ErrOutcomeUnknown and the context's error", own, abandoned)
	}
	inner := &kafkawire.Error{Op: "token 7:1 of role r", Class: kafkawire.OutcomeUnknown, Ended: true,
		Detail: errors.New("the commit failed and its outcome is unknown")}
	for name, cause := range map[string]error{
		"direct":  inner,
		"wrapped": fmt.Errorf("an earlier call: %w", inner),
	} {
		got := kafkaError(&kafkawire.Error{Op: "lease write", Class: kafkawire.OutcomeUnknown, Err: cause})
		if strings.Contains(got.Error(), abandoned) {
			t.Errorf("%s: %v, says the call's context ended, but the cause is a kafkawire error", name, got)
		}
		if !errors.Is(got, ErrOutcomeUnknown) || !strings.Contains(got.Error(), "the commit failed") {
			t.Errorf("%s: %v, want ErrOutcomeUnknown and the cause's words", name, got)
		}
	}
}
