package topicname

import (
	"strings"
	"testing"
)

func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		topic, want string
	}{
		{"commands", ""},
		{"a.b_c-D9", ""},
		{strings.Repeat("x", MaxLen), ""},
		{"", "empty topic name"},
		{".", `cannot be "." or ".."`},
		{"..", `cannot be "." or ".."`},
		{strings.Repeat("x", MaxLen+1), "250 bytes, the maximum is 249"},
		{"a b", `has ' ' at byte 1`},
		{"é", `at byte 0`},
	} {
		err := Check(tc.topic)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("Check(%q) = %v; want nil", tc.topic, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("Check(%q) = %v; want an error that says %q", tc.topic, err, tc.want)
		}
	}
}
