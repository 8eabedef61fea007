package coordination

import (
	"math"
	"testing"
)

// kafkaMurmur2Cases are the cases of Kafka's UtilsTest.testMurmur2.
var kafkaMurmur2Cases = []struct {
	input string
	want  int32
}{
	{"21", -973932308},
	{"foobar", -790332482},
	{"a-little-bit-long-string", -985981536},
	{"a-little-bit-longer-string", -1486304829},
	{"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971},
	{"abc", 479470107},
}

func TestMurmur2MatchesKafkaUtilsTest(t *testing.T) {
	for _, c := range kafkaMurmur2Cases {
		if got := murmur2([]byte(c.input)); got != c.want {
			t.Errorf("murmur2(%q) = %d, Kafka says %d", c.input, got, c.want)
		}
	}
}

func TestToPositiveIsAMaskAndNotAnAbsoluteValue(t *testing.T) {
	tests := []struct{ in, want int32 }{
		{0, 0},
		{1, 1},
		{math.MaxInt32, math.MaxInt32},
		{-1, math.MaxInt32},
		{math.MinInt32, 0},
		{-973932308, -973932308 & 0x7fffffff}, // 1173551340; abs would give 973932308
	}
	for _, test := range tests {
		if got := toPositive(test.in); got != test.want {
			t.Errorf("toPositive(%d) = %d, want %d", test.in, got, test.want)
		}
	}
	if toPositive(-973932308) == 973932308 {
		t.Errorf("toPositive behaves as an absolute value")
	}
}

func TestRolePartition(t *testing.T) {
	controller, err := NewRole("controller")
	if err != nil {
		t.Fatal(err)
	}
	if p, err := RolePartition(controller, 16); err != nil || p != 12 {
		t.Errorf("RolePartition(controller, 16) = %d, %v; the spec says 12", p, err)
	}
	if p, err := RolePartition(controller, DefaultPartitions); err != nil || p != 12 {
		t.Errorf("RolePartition(controller, DefaultPartitions) = %d, %v", p, err)
	}
	// "21" has a negative hash: the mask and the absolute value disagree.
	negative, err := NewRole("21")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{3, 7, 10, 16, 100, 1000} {
		p, err := RolePartition(negative, n)
		if err != nil {
			t.Fatal(err)
		}
		want := int((-973932308 & 0x7fffffff) % n)
		if p != want {
			t.Errorf("RolePartition(21, %d) = %d, want %d", n, p, want)
		}
	}
	if p, _ := RolePartition(negative, 7); p == int(973932308%7) {
		t.Errorf("RolePartition(21, 7) = %d, the absolute value's answer", p)
	}
	for _, n := range []int{1, 2, 3, 7, 16, 1000, math.MaxInt32} {
		p, err := RolePartition(controller, n)
		if err != nil || p < 0 || p >= n {
			t.Errorf("RolePartition(controller, %d) = %d, %v; want a partition in [0, %d)", n, p, err, n)
		}
	}
	if p, _ := RolePartition(controller, 1); p != 0 {
		t.Errorf("one partition: got %d", p)
	}
}

func TestRolePartitionRejects(t *testing.T) {
	role, err := NewRole("controller")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range []int{0, -1, math.MinInt} {
		if p, err := RolePartition(role, n); err == nil {
			t.Errorf("RolePartition(controller, %d) = %d, want an error", n, p)
		}
	}
	// The specification rejects a partition count only: the zero Role gets
	// the partition of the empty name.
	if p, err := RolePartition(Role{}, 16); err != nil || p != int(toPositive(murmur2(nil))%16) {
		t.Errorf("RolePartition(Role{}, 16) = %d, %v; want the partition of the empty name, %d", p, err, toPositive(murmur2(nil))%16)
	}
}

func TestTopicPartitionString(t *testing.T) {
	// String builds the form with strconv since it names the partition in
	// the op of every transaction of a handover; these are the forms that
	// fmt's "%s-%d" gave before, the edges of the range included.
	for _, c := range []struct {
		tp   TopicPartition
		want string
	}{
		{TopicPartition{Topic: StateTopic, Partition: 12}, "__coordination_state-12"},
		{TopicPartition{Topic: "t", Partition: 0}, "t-0"},
		{TopicPartition{Topic: "a-b", Partition: math.MaxInt32}, "a-b-2147483647"},
		{TopicPartition{Topic: "", Partition: -1}, "--1"},
	} {
		if got := c.tp.String(); got != c.want {
			t.Errorf("%#v.String() = %q, want %q", c.tp, got, c.want)
		}
	}
}
