package main

import (
	"bytes"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

func TestShowName(t *testing.T) {
	for _, tt := range []struct{ name, want string }{
		{"node-1", "node-1"},
		{"ledger writer", "ledger writer"}, // the ASCII space is printable
		{"zażółć-węzeł", "zażółć-węzeł"},
		{"evil\x1b[2J", `"evil\x1b[2J"`},
		{"two\nlines", `"two\nlines"`},
		{"tab\there", `"tab\there"`},
		{"cr\rhere", `"cr\rhere"`},
		{"nbsp\u00a0here", `"nbsp\u00a0here"`},
		{"rtl\u202eoverride", `"rtl\u202eoverride"`},
		{"bell\a", `"bell\a"`},
	} {
		if got := showName(tt.name); got != tt.want {
			t.Errorf("showName(%q) = %s, want %s", tt.name, got, tt.want)
		}
	}
}

// assertNoControl fails when text output holds a control character other
// than the newline that ends each line.
func assertNoControl(t *testing.T, what, text string) {
	t.Helper()
	for _, r := range text {
		if r != '\n' && (r < 0x20 || r == 0x7f) {
			t.Fatalf("%s holds the control character %q:\n%q", what, r, text)
		}
	}
}

// A role and a member with control characters in their names reach the
// operator's terminal quoted, in every text output; JSON keeps them as
// they are, escaped.
func TestNamesAreQuotedInText(t *testing.T) {
	const evilRole, evilMember, standby = "ctl\nfake line", "evil\x1b[2J", "tab\tbed"
	role, err := coordination.NewRole(evilRole)
	if err != nil {
		t.Fatal(err)
	}
	partition := coordination.TopicPartition{Topic: coordination.StateTopic, Partition: 3}
	token := mustToken(t, 9, 1)
	state := stateOf(t, role,
		registration(role, evilMember, 0, 1000),
		registration(role, standby, 1, 1000),
		leaseRecord(role, evilMember, token, 2, 1000, 9000),
	)
	result := buildDescribe(role, partition, state, coordination.LeadershipStatus{Role: role, Token: mustToken(t, 9, 2), Held: true}, 5000, coordination.DefaultLeaseConfig())

	var text bytes.Buffer
	printDescribe(&text, result)
	assertNoControl(t, "describe", text.String())
	for _, want := range []string{`role:        "ctl\nfake line"`, `held by "evil\x1b[2J"`, `so "evil\x1b[2J" is fenced`, `  0       "tab\tbed"`} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("describe lacks %s:\n%s", want, text.String())
		}
	}
	if line := summarize(result); !strings.Contains(line, `"evil\x1b[2J" holds token 9:1`) || !strings.Contains(line, `standbys "tab\tbed" (rank 0)`) {
		t.Errorf("summarize = %s", line)
	}
	if line := rosterLine(state); line != `holder "evil\x1b[2J"; standbys "tab\tbed" (rank 0)` {
		t.Errorf("rosterLine = %s", line)
	}

	var lines strings.Builder
	synctest.Test(t, func(t *testing.T) {
		feed := startFeed(t, role, coordination.DefaultLeaseConfig(), 900)
		defer feed.stop()
		feed.log.add(
			registration(role, evilMember, 0, 1000),
			leaseRecord(role, evilMember, token, 1, 1000, 4000),
			leaseRecord(role, standby, mustToken(t, 9, 2), 2, 4500, 8000),
			leaseTombstone(role, 3),
			deregistration(role, evilMember, 4),
		)
		for _, event := range feed.at(5000) {
			lines.WriteString(formatEvent(event))
		}
	})
	assertNoControl(t, "watch", lines.String())
	if got := strings.Count(lines.String(), "\n"); got != 5 {
		t.Errorf("watch printed %d lines for 5 events:\n%s", got, lines.String())
	}
	if !strings.Contains(lines.String(), `"tab\tbed" took over with token 9:2 from "evil\x1b[2J"`) || !strings.Contains(lines.String(), `lease of "tab\tbed" (token 9:2) cleared`) {
		t.Errorf("watch:\n%s", lines.String())
	}

	var out bytes.Buffer
	g := &globals{stdout: &out}
	printFence(g, fenceJSON{Role: evilRole, NewToken: newTokenJSON(token), Holder: evilMember, LeaseToken: newTokenJSON(mustToken(t, 9, 0)), LeaseReleased: true, HolderRemoved: true, Next: standby})
	assertNoControl(t, "fence", out.String())
	if !strings.Contains(out.String(), `fenced role "ctl\nfake line"`) || !strings.Contains(out.String(), `"tab\tbed" is first in the roster; it takes over at once if it is alive`) {
		t.Errorf("fence:\n%s", out.String())
	}

	h := &holder{role: role, member: mustMember(t, evilMember)}
	if h.shownRole() != `"ctl\nfake line"` || h.shownMember() != `"evil\x1b[2J"` {
		t.Errorf("elect and run show role %s, member %s", h.shownRole(), h.shownMember())
	}
}

func mustMember(t *testing.T, name string) coordination.MemberID {
	t.Helper()
	member, err := coordination.NewMemberID(name)
	if err != nil {
		t.Fatal(err)
	}
	return member
}

// fence cannot know whether the first standby is alive (without heartbeats
// nothing tells it): it names the member first in the roster, and says that
// it takes over if it is alive, never that it takes over now.
func TestFenceSaysWhatItKnowsOfTheNext(t *testing.T) {
	token := mustToken(t, 7, 1)
	for _, tt := range []struct {
		removed bool
		want    string
	}{
		{true, "lease cleared and node-0 out of the roster: node-1 is first in the roster; it takes over at once if it is alive"},
		{false, "lease cleared: node-1 is first in the roster after node-0; it takes over once node-0 leaves the roster, if it is alive"},
	} {
		var out bytes.Buffer
		printFence(&globals{stdout: &out}, fenceJSON{Role: "ctl", NewToken: newTokenJSON(token), Holder: "node-0", LeaseToken: newTokenJSON(mustToken(t, 7, 0)),
			LeaseReleased: true, HolderRemoved: tt.removed, Next: "node-1"})
		if !strings.Contains(out.String(), tt.want) || strings.Contains(out.String(), "takes over now") {
			t.Errorf("fence (holder removed %t):\n%s\nwant %q", tt.removed, out.String(), tt.want)
		}
	}
}
