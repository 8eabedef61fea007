package coordination

// The table test of the one check of guarded records
// (checkGuardedRecords, transport.go).

import (
	"math"
	"strings"
	"testing"
)

func TestCheckGuardedRecords(t *testing.T) {
	own := func(topic string) bool { return topic == "roles" }
	rows := []struct {
		name       string
		records    []GuardedRecord
		stateTopic func(string) bool
		want       string // a part of the error, "" for none
	}{
		{"none", nil, own, ""},
		{"a command", []GuardedRecord{{Topic: "commands", Partition: 3, Key: []byte("k"), Value: []byte("v")}}, own, ""},
		{"no key, no value", []GuardedRecord{{Topic: "commands"}}, own, ""},
		{"the last partition Kafka holds", []GuardedRecord{{Topic: "commands", Partition: math.MaxInt32}}, own, ""},
		{"no topic", []GuardedRecord{{Topic: "commands"}, {Partition: 1}}, own, "record 1 has no topic"},
		{"a negative partition", []GuardedRecord{{Topic: "commands", Partition: -1}}, own, "record 0 has the partition -1, outside 0 to 2^31-1"},
		{"the caller's state topic", []GuardedRecord{{Topic: "roles"}}, own, "record 0 is for the state topic roles"},
		{"StateTopic, always", []GuardedRecord{{Topic: StateTopic}}, own, "record 0 is for the state topic " + StateTopic},
		{"StateTopic, without a state topic of the caller's", []GuardedRecord{{Topic: StateTopic}}, nil, "is for the state topic"},
		{"the first failure wins", []GuardedRecord{{Topic: "roles", Partition: -1}, {}}, own, "record 0 has the partition -1"},
	}
	if math.MaxInt > math.MaxInt32 {
		past := int64(math.MaxInt32)
		past++ // a partition Kafka has no name for; an int holds it on 64-bit only
		big := int(past)
		rows = append(rows, struct {
			name       string
			records    []GuardedRecord
			stateTopic func(string) bool
			want       string
		}{"past 2^31-1", []GuardedRecord{{Topic: "commands", Partition: big}}, own, "outside 0 to 2^31-1"})
	}
	for _, r := range rows {
		t.Run(r.name, func(t *testing.T) {
			err := checkGuardedRecords(r.records, r.stateTopic)
			switch {
			case r.want == "" && err != nil:
				t.Fatalf("checkGuardedRecords = %v; want nil", err)
			case r.want != "" && (err == nil || !strings.Contains(err.Error(), r.want)):
				t.Fatalf("checkGuardedRecords = %v; want an error with %q", err, r.want)
			}
		})
	}
}
