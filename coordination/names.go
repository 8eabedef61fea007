package coordination

import (
	"fmt"
	"unicode/utf8"
)

const (
	// MaxRoleLen is the maximum length of a [Role], in bytes.
	MaxRoleLen = 249

	// MaxMemberIDLen is the maximum length of a [MemberID], in bytes.
	MaxMemberIDLen = 249
)

// Role is the validated name of one coordination role, such as the name of
// an active controller.
//
// A role becomes a Kafka transactional.id. The transaction coordinator mints
// one producer epoch for that id, so the role names the fenced group of
// members that compete for the same leadership.
//
// [NewRole] is the only way to build a role with a name, so a non-zero Role
// value is proof that the name is well formed. A Role is a small immutable
// value: copy it freely and share it between goroutines.
type Role struct {
	name string
}

// NewRole parses a role name. It rejects an empty name and a name longer
// than [MaxRoleLen] bytes. It also rejects a name that is not UTF-8, because
// the record layout and the partition rule read the name as UTF-8, and the
// an implementation in another language (or Kafka's own murmur2 in Java)
// could not hash it the same way. Any UTF-8 text within
// the bound is a role, because Kafka accepts any transactional.id.
//
// The error is a *[NameError]; its Fault tells the three refusals apart.
func NewRole(name string) (Role, error) {
	if err := checkName("role", name, MaxRoleLen); err != nil {
		return Role{}, err
	}
	return Role{name: name}, nil
}

// String returns the role name.
func (r Role) String() string { return r.name }

// IsZero reports whether r is the zero Role, which names no role.
func (r Role) IsZero() bool { return r.name == "" }

// MemberID is the validated identity of one member that competes for a role.
//
// A member picks its own id and keeps that id across a reconnect, so the
// succession order survives a short network failure.
//
// [NewMemberID] is the only way to build a member id with a name, so a
// non-zero MemberID value is proof that the id is well formed. The zero value
// names no member, and a lease key carries it. A MemberID is an immutable
// value, safe to share between goroutines.
type MemberID struct {
	name string
}

// NewMemberID parses a member id. It rejects an empty id, an id longer than
// [MaxMemberIDLen] bytes, and an id that is not UTF-8.
func NewMemberID(name string) (MemberID, error) {
	if err := checkName("member id", name, MaxMemberIDLen); err != nil {
		return MemberID{}, err
	}
	return MemberID{name: name}, nil
}

// String returns the member id.
func (m MemberID) String() string { return m.name }

// IsZero reports whether m is the zero MemberID, which names no member.
func (m MemberID) IsZero() bool { return m.name == "" }

// checkName applies the bounds that [NewRole] and [NewMemberID] share.
func checkName(what, name string, limit int) error {
	switch {
	case name == "":
		return &NameError{Kind: what, Fault: NameEmpty, Reason: "empty"}
	case len(name) > limit:
		return &NameError{Kind: what, Name: name, Fault: NameTooLong, Reason: fmt.Sprintf("%d bytes, the maximum is %d", len(name), limit)}
	case !utf8.ValidString(name):
		return &NameError{Kind: what, Name: name, Fault: NameNotUTF8, Reason: "not UTF-8"}
	}
	return nil
}
