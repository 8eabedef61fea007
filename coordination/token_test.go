package coordination_test

import (
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func TestNewFencingTokenRejectsNegatives(t *testing.T) {
	tests := []struct {
		id    int64
		epoch int16
		ok    bool
	}{
		{0, 0, true},
		{4242, 7, true},
		{math.MaxInt64, math.MaxInt16, true},
		{-1, 0, false},
		{0, -1, false},
		{-1, -1, false},
		{math.MinInt64, 0, false},
		{0, math.MinInt16, false},
	}
	for _, test := range tests {
		token, err := coordination.NewFencingToken(test.id, test.epoch)
		if (err == nil) != test.ok {
			t.Errorf("NewFencingToken(%d, %d) error = %v, want ok=%t", test.id, test.epoch, err, test.ok)
			continue
		}
		if test.ok && (token.ProducerID() != test.id || token.ProducerEpoch() != test.epoch) {
			t.Errorf("NewFencingToken(%d, %d) = %d:%d", test.id, test.epoch, token.ProducerID(), token.ProducerEpoch())
		}
	}
}

func TestFencingTokenCompare(t *testing.T) {
	tests := []struct {
		name string
		a, b coordination.FencingToken
		want int
	}{
		{"equal", fxToken(t, 4242, 7), fxToken(t, 4242, 7), 0},
		{"epoch decides within one producer id", fxToken(t, 4242, 8), fxToken(t, 4242, 7), 1},
		{"lower epoch", fxToken(t, 4242, 6), fxToken(t, 4242, 7), -1},
		{"producer id leads", fxToken(t, 4243, 0), fxToken(t, 4242, 9), 1},
		{"lower producer id with higher epoch", fxToken(t, 1, math.MaxInt16), fxToken(t, 2, 0), -1},
		// The int16 wrap: Kafka answers an exhausted epoch with a fresh
		// producer id and epoch 0.
		{"wrap: fresh id supersedes exhausted epoch", fxToken(t, 5, 0), fxToken(t, 4, math.MaxInt16), 1},
		{"wrap: exhausted epoch ranks below", fxToken(t, 4, math.MaxInt16), fxToken(t, 5, 0), -1},
		{"NoEpoch below 0:0", coordination.NoEpoch, fxToken(t, 0, 0), -1},
		{"0:0 above NoEpoch", fxToken(t, 0, 0), coordination.NoEpoch, 1},
		{"NoEpoch equals itself", coordination.NoEpoch, coordination.NoEpoch, 0},
	}
	for _, test := range tests {
		t.Run(test.name, func(t *testing.T) {
			got := sign(test.a.Compare(test.b))
			if got != test.want {
				t.Fatalf("%s.Compare(%s) sign = %d, want %d", test.a, test.b, got, test.want)
			}
			if back := sign(test.b.Compare(test.a)); back != -test.want {
				t.Errorf("%s.Compare(%s) sign = %d, want %d (antisymmetry)", test.b, test.a, back, -test.want)
			}
			if s := test.a.Supersedes(test.b); s != (test.want > 0) {
				t.Errorf("%s.Supersedes(%s) = %t, want %t", test.a, test.b, s, test.want > 0)
			}
			if eq := test.a == test.b; eq != (test.want == 0) {
				t.Errorf("%s == %s is %t, want %t", test.a, test.b, eq, test.want == 0)
			}
		})
	}
}

func TestNoEpochRanksBelowEveryMintedToken(t *testing.T) {
	if coordination.NoEpoch.ProducerID() != -1 || coordination.NoEpoch.ProducerEpoch() != -1 {
		t.Fatalf("NoEpoch = %d:%d, want Kafka's -1:-1", coordination.NoEpoch.ProducerID(), coordination.NoEpoch.ProducerEpoch())
	}
	for _, id := range []int64{0, 1, 4242, math.MaxInt64} {
		for _, epoch := range []int16{0, 1, math.MaxInt16} {
			token := fxToken(t, id, epoch)
			if !token.Supersedes(coordination.NoEpoch) || coordination.NoEpoch.Supersedes(token) {
				t.Errorf("NoEpoch does not rank below %s", token)
			}
		}
	}
}

func TestFencingTokenStringRoundTrip(t *testing.T) {
	tokens := []coordination.FencingToken{
		fxToken(t, 0, 0),
		fxToken(t, 4242, 7),
		fxToken(t, math.MaxInt64, math.MaxInt16),
		coordination.NoEpoch,
	}
	wants := []string{"0:0", "4242:7", "9223372036854775807:32767", "-1:-1"}
	for i, token := range tokens {
		if got := token.String(); got != wants[i] {
			t.Errorf("String() = %q, want %q", got, wants[i])
		}
		back, err := coordination.ParseFencingToken(token.String())
		if err != nil {
			t.Errorf("ParseFencingToken(%q): %v", token, err)
			continue
		}
		if back != token {
			t.Errorf("ParseFencingToken(%q) = %s", token, back)
		}
	}
	parsed, err := coordination.ParseFencingToken("-1:-1")
	if err != nil || parsed != coordination.NoEpoch {
		t.Errorf(`ParseFencingToken("-1:-1") = %s, %v; want NoEpoch`, parsed, err)
	}
}

func TestParseFencingTokenRejects(t *testing.T) {
	for _, text := range []string{
		"",
		"4242",
		"4242:",
		":7",
		"4242:7:1",
		"a:7",
		"4242:b",
		" 4242:7",
		"4242:7 ",
		"4242:32768",            // epoch out of int16
		"9223372036854775808:0", // id out of int64
		"-1:0",                  // negative id
		"0:-1",                  // negative epoch
		"-1:7",                  // only the exact pair -1:-1 is NoEpoch
		"-2:-1",
		"4242;7",
		"0x10:7",
		// Only the canonical form that String writes parses.
		"+4242:7",
		"4242:+7",
		"04242:7",
		"4242:07",
		"-0:0",
	} {
		token, err := coordination.ParseFencingToken(text)
		if err == nil {
			t.Errorf("ParseFencingToken(%q) = %s, want an error", text, token)
			continue
		}
		if !strings.Contains(err.Error(), strconv.Quote(text)) {
			t.Errorf("ParseFencingToken(%q) error %q does not quote the text", text, err)
		}
	}
}

func sign(n int) int {
	switch {
	case n < 0:
		return -1
	case n > 0:
		return 1
	}
	return 0
}
