package coordination_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func TestNameBounds(t *testing.T) {
	if coordination.MaxRoleLen != 249 || coordination.MaxMemberIDLen != 249 {
		t.Fatalf("MaxRoleLen, MaxMemberIDLen = %d, %d; the spec fixes both at 249", coordination.MaxRoleLen, coordination.MaxMemberIDLen)
	}
	tests := []struct {
		label string
		name  string
		ok    bool
	}{
		{"empty", "", false},
		{"one byte", "a", true},
		{"typical", "controller", true},
		{"249 ASCII bytes", strings.Repeat("r", 249), true},
		{"250 ASCII bytes", strings.Repeat("r", 250), false},
		{"non-ASCII", "é-rôle 日本 🦀", true},
		// The bound is in bytes, not in runes: 83 runes of 3 bytes are 249
		// bytes, and 84 of them are 252.
		{"249 bytes of 3-byte runes", strings.Repeat("日", 83), true},
		{"84 runes of 3 bytes", strings.Repeat("日", 84), false},
		{"125 runes of 2 bytes", strings.Repeat("é", 125), false},
		{"space and punctuation", "role with spaces/and:colons", true},
		// The layout and the partition rule read a name as UTF-8.
		{"invalid UTF-8", "role-\xff", false},
		{"a lone continuation byte", "\x80", false},
	}
	for _, test := range tests {
		t.Run(test.label, func(t *testing.T) {
			role, err := coordination.NewRole(test.name)
			if (err == nil) != test.ok {
				t.Fatalf("NewRole(%d bytes) error = %v, want ok=%t", len(test.name), err, test.ok)
			}
			member, merr := coordination.NewMemberID(test.name)
			if (merr == nil) != test.ok {
				t.Fatalf("NewMemberID(%d bytes) error = %v, want ok=%t", len(test.name), merr, test.ok)
			}
			if !test.ok {
				if !role.IsZero() || !member.IsZero() {
					t.Errorf("a rejected name returned a non-zero value: %q, %q", role, member)
				}
				if !strings.Contains(err.Error(), "role") || !strings.Contains(merr.Error(), "member id") {
					t.Errorf("errors do not say what they reject: %q, %q", err, merr)
				}
				return
			}
			if role.String() != test.name || member.String() != test.name {
				t.Errorf("String() = %q, %q; want the name byte for byte", role, member)
			}
			if role.IsZero() || member.IsZero() {
				t.Errorf("a parsed name is zero")
			}
		})
	}
}

func TestZeroNames(t *testing.T) {
	var role coordination.Role
	var member coordination.MemberID
	if !role.IsZero() || role.String() != "" {
		t.Errorf("zero Role: IsZero %t, String %q", role.IsZero(), role)
	}
	if !member.IsZero() || member.String() != "" {
		t.Errorf("zero MemberID: IsZero %t, String %q", member.IsZero(), member)
	}
	a, b := fxRole(t, "controller"), fxRole(t, "controller")
	if a != b {
		t.Errorf("two roles of one name differ under ==")
	}
	if fxMember(t, "node-1") == fxMember(t, "node-2") {
		t.Errorf("two members of different names are equal under ==")
	}
}

// TestNameErrorFault: a caller tells the three refusals apart by the
// NameError's Fault, without reading the message.
func TestNameErrorFault(t *testing.T) {
	for name, want := range map[string]coordination.NameFault{
		"":                       coordination.NameEmpty,
		strings.Repeat("r", 250): coordination.NameTooLong,
		"role-\xff":              coordination.NameNotUTF8,
	} {
		for _, build := range []func(string) error{
			func(s string) error { _, err := coordination.NewRole(s); return err },
			func(s string) error { _, err := coordination.NewMemberID(s); return err },
		} {
			var nameErr *coordination.NameError
			if err := build(name); !errors.As(err, &nameErr) || nameErr.Fault != want {
				t.Errorf("the error for %q = %v; want a *NameError with Fault %d", name, err, want)
			}
		}
	}
}
