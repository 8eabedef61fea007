// Package topicname holds Kafka's rules for a topic name (Kafka's
// Topic.validate), which package coordination (WithTopic) and package
// device (the command topics of a reader) both apply. It imports nothing
// of the module.
package topicname

import (
	"errors"
	"fmt"
)

// MaxLen is the longest topic name Kafka accepts, in bytes.
const MaxLen = 249

// Check returns an error that says what is wrong with a topic name: empty,
// "." or "..", longer than MaxLen bytes, or a byte outside [a-zA-Z0-9._-].
func Check(topic string) error {
	switch {
	case topic == "":
		return errors.New("empty topic name")
	case topic == "." || topic == "..":
		return errors.New("topic name cannot be \".\" or \"..\"")
	case len(topic) > MaxLen:
		return fmt.Errorf("topic name is %d bytes, the maximum is %d", len(topic), MaxLen)
	}
	for i := 0; i < len(topic); i++ {
		c := topic[i]
		if !('a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' || c == '.' || c == '_' || c == '-') {
			return fmt.Errorf("topic name has %q at byte %d: Kafka allows [a-zA-Z0-9._-]", c, i)
		}
	}
	return nil
}
