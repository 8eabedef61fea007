package device_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/krabka-io/krabka-streams-go/coordination"
	"github.com/krabka-io/krabka-streams-go/coordination/device"
	"github.com/krabka-io/krabka-streams-go/coordination/internal/bridge"
	"github.com/krabka-io/krabka-streams-go/coordination/internal/kafkawire"
)

// NewKafkaCommandReader refuses bad input with an error that names it,
// before it opens anything.
func TestNewKafkaCommandReaderRefusesBadInput(t *testing.T) {
	for _, tt := range []struct {
		name    string
		topics  []string
		brokers []string
		want    string
	}{
		{"no topics", nil, []string{"127.0.0.1:9092"}, "no topics"},
		{"an empty topic", []string{"commands", ""}, []string{"127.0.0.1:9092"}, `topic 1 "": empty topic name`},
		{"a bad topic", []string{"com mands"}, []string{"127.0.0.1:9092"}, `has ' ' at byte 3`},
		{"no brokers", []string{"commands"}, nil, "no brokers"},
	} {
		reader, err := device.NewKafkaCommandReader(tt.topics, nil, tt.brokers...)
		if err == nil {
			reader.Close()
			t.Errorf("%s: NewKafkaCommandReader succeeded; want an error", tt.name)
			continue
		}
		if !strings.HasPrefix(err.Error(), "device: NewKafkaCommandReader: ") || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: NewKafkaCommandReader = %q; want it to name %q", tt.name, err, tt.want)
		}
	}
}

// The reader's errors go through coordination's one renderer: a missing
// ACL wraps coordination.ErrNotAuthorized and the broker's code, with the
// "coordination: " prefix once.
func TestReaderErrorsUseCoordinationsRenderer(t *testing.T) {
	if bridge.KafkaError == nil {
		t.Fatal("bridge.KafkaError is not set: package coordination's init did not hand its renderer over")
	}
	err := bridge.KafkaError(&kafkawire.Error{Op: "metadata of commands", Class: kafkawire.NotAuthorized, Err: kerr.TopicAuthorizationFailed})
	if !errors.Is(err, coordination.ErrNotAuthorized) || !errors.Is(err, kerr.TopicAuthorizationFailed) {
		t.Fatalf("rendered %v; want it to wrap ErrNotAuthorized and TOPIC_AUTHORIZATION_FAILED", err)
	}
	if !strings.HasPrefix(err.Error(), "coordination: metadata of commands: ") || strings.Count(err.Error(), "coordination: ") != 1 {
		t.Fatalf("rendered %q; want the prefix once, then the call", err)
	}
}
