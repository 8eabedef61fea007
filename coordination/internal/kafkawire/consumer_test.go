package kafkawire

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/krabka-io/krabka-streams-go/internal/kafkatest"
)

// CheckTopics tells a topic that does not exist (Missing, naming it) from
// topics that all exist (nil), and a closed consumer (Closed).
func TestConsumerCheckTopics(t *testing.T) {
	c := kafkatest.Fake(t)
	present := c.CreateTopic(t, "present", 1, nil)
	ctx := context.Background()

	found, err := NewConsumer([]string{present}, nil, c.Brokers)
	if err != nil {
		t.Fatal(err)
	}
	defer found.Close()
	if err := found.CheckTopics(ctx); err != nil {
		t.Fatalf("CheckTopics of an existing topic: %v", err)
	}

	missing, err := NewConsumer([]string{present, "no-such-topic"}, nil, c.Brokers)
	if err != nil {
		t.Fatal(err)
	}
	err = missing.CheckTopics(ctx)
	if ClassOf(err) != Missing || !errors.Is(err, kerr.UnknownTopicOrPartition) || !strings.Contains(err.Error(), `"no-such-topic"`) {
		t.Fatalf("CheckTopics with a missing topic: %v (class %v); want Missing, naming it", err, ClassOf(err))
	}
	missing.Close()
	select {
	case <-missing.Closed():
	default:
		t.Fatal("Closed is open after Close")
	}
	if err := missing.CheckTopics(ctx); ClassOf(err) != Closed {
		t.Fatalf("CheckTopics of a closed consumer: %v; want Closed", err)
	}
}
