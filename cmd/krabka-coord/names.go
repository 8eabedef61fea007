package main

// Names on the command line: a ROLE, a MEMBER and the state topic,
// validated before any connection, with a message that says what to do.

import (
	"errors"
	"fmt"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// parseRole validates a role name.
func parseRole(name string) (coordination.Role, error) {
	role, err := coordination.NewRole(name)
	if err != nil {
		return role, usageError("invalid ROLE %s: %s", quoteName(name), nameProblem(err, coordination.MaxRoleLen, "controller"))
	}
	return role, nil
}

// parseMember validates a member id.
func parseMember(name string) (coordination.MemberID, error) {
	member, err := coordination.NewMemberID(name)
	if err != nil {
		return member, usageError("invalid MEMBER %s: %s", quoteName(name), nameProblem(err, coordination.MaxMemberIDLen, "node-1"))
	}
	return member, nil
}

// quoteName quotes a name for an error message, and shortens a long one.
func quoteName(name string) string {
	if len(name) > 40 {
		return fmt.Sprintf("%q... (%d bytes)", name[:32], len(name))
	}
	return fmt.Sprintf("%q", name)
}

// nameProblem says what is wrong with a name and what to do; example is a
// good name of the kind. It compares the NameError's Fault, not the text.
func nameProblem(err error, limit int, example string) string {
	var nameErr *coordination.NameError
	if errors.As(err, &nameErr) {
		switch nameErr.Fault {
		case coordination.NameEmpty:
			return "empty; pass a non-empty name such as " + example
		case coordination.NameTooLong:
			return fmt.Sprintf("longer than %d bytes; pass a shorter name", limit)
		case coordination.NameNotUTF8:
			return "not valid UTF-8; pass the name in UTF-8"
		}
	}
	return errText(err)
}

// topicNameProblem applies Kafka's rules for a topic name, and returns ""
// for a valid one or what is wrong.
func topicNameProblem(topic string) string {
	switch {
	case topic == "":
		return "empty; pass the state topic of the members, such as " + coordination.StateTopic
	case topic == "." || topic == "..":
		return `"." and ".." are not topic names`
	case len(topic) > 249:
		return fmt.Sprintf("%d bytes; a topic name has at most 249", len(topic))
	}
	for _, r := range topic {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '.' || r == '_' || r == '-') {
			return fmt.Sprintf("holds %q; a topic name has only the characters a-z, A-Z, 0-9, '.', '_' and '-'", r)
		}
	}
	return ""
}
