package demo

// The checks of demo: the command topic read back read_committed, against
// the commands that the broker acknowledged, and what the observer saw of
// the failover.

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/krabka-io/krabka-streams-go/cmd/krabka-coord/internal/clifmt"
	"github.com/krabka-io/krabka-streams-go/coordination"
)

// checkJSON is the result of one check of the demo.
type checkJSON struct {
	Name   string `json:"name"`
	OK     bool   `json:"ok"`
	Detail string `json:"detail"`
}

// check records the result of one check.
func (d *demo) check(name string, ok bool, detail string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.checks = append(d.checks, checkJSON{Name: name, OK: ok, Detail: detail})
}

func (d *demo) failedChecks() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	failed := 0
	for _, c := range d.checks {
		if !c.OK {
			failed++
		}
	}
	return failed
}

// endMarker is the key of the record that the check appends, outside any
// transaction, after every member stopped: a read_committed reader that
// reaches it has seen every decided transaction before it.
const endMarker = "demo-end"

// checkCommands reads the command topic read_committed and checks it
// against the acknowledged commands. It returns what it read.
func (d *demo) checkCommands(ctx context.Context) []commandJSON {
	acked := d.ledger.all()
	read, err := d.readCommands(ctx)
	if err != nil {
		d.check("read the command topic", false, err.Error())
		return nil
	}
	d.checkInOrder(read)
	d.checkNoneLost(read, acked)
	d.checkNoDeposedWriter(read)
	d.checkNoEarlyFailover()
	d.checkFenced()
	return read
}

// checkInOrder: every command in order, 1, 2, 3, ... with no gap and no
// repeat.
func (d *demo) checkInOrder(read []commandJSON) {
	inOrder, detail := true, fmt.Sprintf("%d commands, 1 to %d, each once and in order", len(read), len(read))
	for i, c := range read {
		if c.Seq != i+1 {
			inOrder, detail = false, fmt.Sprintf("record %d (offset %d) holds command %d, want %d", i, c.Offset, c.Seq, i+1)
			break
		}
	}
	if len(read) == 0 {
		inOrder, detail = false, "no command in the topic"
	}
	d.check("in order", inOrder, detail)
}

// checkNoneLost: no acknowledged command is missing, and nothing that was
// not acknowledged is in the topic.
func (d *demo) checkNoneLost(read, acked []commandJSON) {
	lost := 0
	present := make(map[string]bool, len(read))
	for _, c := range read {
		present[fmt.Sprintf("%d/%s/%s", c.Seq, c.Member, c.Token)] = true
	}
	for _, c := range acked {
		if !present[fmt.Sprintf("%d/%s/%s", c.Seq, c.Member, c.Token)] {
			lost++
		}
	}
	d.check("none lost", lost == 0 && len(read) == len(acked), fmt.Sprintf(
		"%d acknowledged, %d in the topic, %d acknowledged but missing", len(acked), len(read), lost))
}

// checkNoDeposedWriter: no command of a deposed leader after its
// successor's first: along the log, a token that another one followed
// never comes back. Commit order in the log orders the terms; the producer
// ids of two leaderships say nothing about their order. The command that
// the broker refused is not in the topic either.
func (d *demo) checkNoDeposedWriter(read []commandJSON) {
	fencedOK, terms := true, []string{}
	superseded := make(map[string]bool)
	previous := ""
	for i, c := range read {
		if _, err := coordination.ParseFencingToken(c.Token); err != nil {
			fencedOK, terms = false, []string{fmt.Sprintf("command %d carries token %q: %v", c.Seq, c.Token, err)}
			break
		}
		if i > 0 && c.Token != previous {
			if superseded[c.Token] {
				fencedOK = false
				terms = append(terms, fmt.Sprintf("command %d under %s comes after commands under %s, which followed it: a deposed leader wrote after its successor", c.Seq, c.Token, previous))
				break
			}
			superseded[previous] = true
			terms[len(terms)-1] += fmt.Sprintf("-%d", read[i-1].Seq)
		}
		if i == 0 || c.Token != previous {
			terms = append(terms, fmt.Sprintf("%s %s: %d", c.Member, c.Token, c.Seq))
		}
		previous = c.Token
	}
	if fencedOK && len(read) > 0 {
		terms[len(terms)-1] += fmt.Sprintf("-%d", read[len(read)-1].Seq)
	}
	d.mu.Lock()
	refusedSeq, refusedToken, crashed := d.refusedSeq, d.refusedToken, d.crashed
	d.mu.Unlock()
	for _, c := range read {
		if crashed != nil && c.Member == crashed.name && c.Token == refusedToken && c.Seq >= refusedSeq {
			fencedOK = false
			terms = append(terms, fmt.Sprintf("the refused command %d of %s is in the topic", c.Seq, crashed.name))
		}
	}
	verdict := "; no token comes back after its successor's first command"
	if !fencedOK {
		verdict = "; want no command under a token after its successor's first"
	}
	d.check("no deposed writer", fencedOK, "terms "+strings.Join(terms, ", ")+verdict)
}

// checkNoEarlyFailover: no failover before the crash; the holder renewed
// in time all along.
func (d *demo) checkNoEarlyFailover() {
	d.mu.Lock()
	crashAt := d.crashAt
	early := []string{}
	for _, t := range d.takeovers {
		if (t.Kind == clifmt.EventTakeover || t.Kind == clifmt.EventReacquired) && !crashAt.IsZero() && t.At.Millis < crashAt.UnixMilli() {
			early = append(early, t.Message)
		}
	}
	d.mu.Unlock()
	if len(early) == 0 {
		d.check("no early failover", true, "the first leader renewed its lease in time until it crashed")
	} else {
		d.check("no early failover", false, fmt.Sprintf("the role changed hands before the crash (%s): a renewal did not land within the lease %v, renewed every %v; the host or the cluster is too slow for these timings: rerun with a longer --lease-duration and --renew-interval",
			strings.Join(early, "; "), d.config.Duration(), d.config.RenewInterval()))
	}
}

// checkFenced: the refusal of the deposed leader's write itself, and the
// failover at the deadline of its lease, not before.
func (d *demo) checkFenced() {
	d.mu.Lock()
	refusedSeq, refusedToken, crashed := d.refusedSeq, d.refusedToken, d.crashed
	takeovers := append([]clifmt.RoleEvent(nil), d.takeovers...)
	d.mu.Unlock()
	if crashed == nil {
		return
	}
	d.check("fenced", refusedSeq > 0, fmt.Sprintf("the write of command %d by %s under %s after the failover was refused (ErrFenced) and is not in the topic",
		refusedSeq, crashed.name, refusedToken))
	for _, t := range takeovers {
		if t.Kind == clifmt.EventTakeover && t.PreviousMember == crashed.name && t.GrantedAt != nil && t.PreviousDeadline != nil {
			early := t.PreviousDeadline.Millis - t.GrantedAt.Millis
			if early <= 0 {
				d.check("failover at the deadline", true, fmt.Sprintf("%s took over %s after %s's lease expired, not before", t.Member, clifmt.FormatShort(time.Duration(-early)*time.Millisecond), crashed.name))
			} else {
				d.check("failover at the deadline", false, fmt.Sprintf("%s's lease was granted %s BEFORE the deadline of %s's lease; want at or after it", t.Member, clifmt.FormatShort(time.Duration(early)*time.Millisecond), crashed.name))
			}
			break
		}
	}
}

// readCommands appends the end marker and reads the command topic
// read_committed up to it.
func (d *demo) readCommands(ctx context.Context) ([]commandJSON, error) {
	producer, err := kgo.NewClient(append(d.clientOpts(), kgo.RecordPartitioner(kgo.ManualPartitioner()))...)
	if err != nil {
		return nil, err
	}
	defer producer.Close()
	if err := producer.ProduceSync(ctx, &kgo.Record{Topic: d.commands, Partition: 0, Key: []byte(endMarker)}).FirstErr(); err != nil {
		return nil, fmt.Errorf("append the end marker: %w", err)
	}
	consumer, err := kgo.NewClient(append(d.clientOpts(),
		kgo.ConsumePartitions(map[string]map[int32]kgo.Offset{d.commands: {0: kgo.NewOffset().AtStart()}}),
		kgo.FetchIsolationLevel(kgo.ReadCommitted()))...)
	if err != nil {
		return nil, err
	}
	defer consumer.Close()
	var read []commandJSON
	for {
		fetches := consumer.PollFetches(ctx)
		if ctx.Err() != nil {
			return read, fmt.Errorf("read %s: %w after %d commands", d.commands, ctx.Err(), len(read))
		}
		if err := fetches.Err(); err != nil {
			return read, fmt.Errorf("read %s: %w", d.commands, err)
		}
		end := false
		fetches.EachRecord(func(r *kgo.Record) {
			if end {
				return
			}
			if string(r.Key) == endMarker {
				end = true
				return
			}
			var c commandJSON
			if err := json.Unmarshal(r.Value, &c); err != nil {
				c = commandJSON{Seq: -1, Member: "?", Token: string(r.Value)}
			}
			c.Offset = r.Offset
			read = append(read, c)
		})
		if end {
			return read, nil
		}
	}
}
