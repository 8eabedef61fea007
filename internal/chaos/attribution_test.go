package chaos

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkacodes"
)

// newMintBroker is a fake transaction coordinator: it answers every
// InitProducerId with producer id 7 and the next epoch, from 0.
func newMintBroker(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var conns sync.Map
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
	var mu sync.Mutex
	epoch := int16(-1)
	wg.Go(func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Store(conn, true)
			wg.Go(func() {
				defer conn.Close()
				r := bufio.NewReader(conn)
				for {
					frame, err := readFrame(r)
					if err != nil {
						return
					}
					req, corr, err := kafkacodes.ReadRequest(frame)
					if err != nil {
						t.Errorf("the mint broker cannot read a request: %v", err)
						return
					}
					resp := kmsg.NewPtrInitProducerIDResponse()
					resp.SetVersion(req.GetVersion())
					mu.Lock()
					epoch++
					resp.ProducerID, resp.ProducerEpoch = 7, epoch
					mu.Unlock()
					if _, err := conn.Write(kafkacodes.AppendResponse(nil, corr, resp)); err != nil {
						return
					}
				}
			})
		}
	})
	return ln.Addr().String()
}

// TestKafkaProxyRecordsThePairsOfAFaultedInitProducerID: the proxy notes
// the transactional id of a faulted InitProducerId and the pair of each
// answer the broker gave it, and whether that answer went to the client:
// for a duplicate, the first pair (7:0) went to the client and the
// second (7:1) nowhere.
func TestKafkaProxyRecordsThePairsOfAFaultedInitProducerID(t *testing.T) {
	p, err := NewKafkaProxy("127.0.0.1:0", newMintBroker(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	var mu sync.Mutex
	var logged []Mint
	p.OnMint(func(m Mint) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, m)
	})
	armed := Arm(RequestFault{Mode: RequestDuplicate, Keys: []int16{kmsg.InitProducerID.Int16()}}, p)
	c := dialKafka(t, p)
	init := kmsg.NewPtrInitProducerIDRequest()
	init.SetVersion(4)
	role := "controller"
	init.TransactionalID, init.TransactionTimeoutMillis, init.ProducerID, init.ProducerEpoch = &role, 6000, -1, -1
	if _, err := c.conn.Write(kafkaRequest(init, 5)); err != nil {
		t.Fatal(err)
	}
	if corr, _, err := c.answer(5 * time.Second); err != nil || corr != 5 {
		t.Fatalf("answer = %d, %v; want 5", corr, err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		hit, ok := armed.Hit()
		if ok && len(hit.Mints) == 2 {
			if hit.TxnID != role || hit.Mints[0].Token() != "7:0" || !hit.Mints[0].ToClient ||
				hit.Mints[1].Token() != "7:1" || hit.Mints[1].ToClient || hit.Mints[1].AtMillis == 0 {
				t.Fatalf("Hit() = %+v; want txn id %q, 7:0 to the client, then 7:1 nowhere", hit, role)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Hit() = %+v, %v; want two minted pairs", hit, ok)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// An InitProducerId that no fault takes is in the mint log too.
	if _, err := c.conn.Write(kafkaRequest(init, 6)); err != nil {
		t.Fatal(err)
	}
	if corr, _, err := c.answer(5 * time.Second); err != nil || corr != 6 {
		t.Fatalf("answer = %d, %v; want 6", corr, err)
	}
	mu.Lock()
	defer mu.Unlock()
	var got []string
	for _, m := range logged {
		got = append(got, fmt.Sprintf("%s %s %t", m.TxnID, m.Token(), m.ToClient))
	}
	want := []string{"controller 7:0 true", "controller 7:1 false", "controller 7:2 true"}
	if !slices.Equal(got, want) {
		t.Fatalf("OnMint got %q; want %q", got, want)
	}
}

// fenceHistory is the clean run (m1 under 7:0, m2 under 7:1, m3 under
// 7:2) plus events of acquisition, and the fence of m3's 7:2 at 9500.
func fenceHistory(t *testing.T) *history {
	h := clean(t)
	h.in.Events = append(h.in.Events,
		Event{Kind: EventAcquired, WallMillis: 900, Member: "m1", Incarnation: 1, Role: h.role, Token: "7:0"},
		Event{Kind: EventAcquired, WallMillis: 4400, Member: "m2", Incarnation: 1, Role: h.role, Token: "7:1"},
		Event{Kind: EventAcquired, WallMillis: 8900, Member: "m3", Incarnation: 1, Role: h.role, Token: "7:2"},
		Event{Kind: EventFenced, WallMillis: 9500, Member: "m3", Incarnation: 1, Role: h.role, Token: "7:2", Seq: 60})
	return h
}

// initFault is a request fault of an InitProducerId of the role, taken at
// at, whose answers carried mints.
func initFault(index int, mode RequestMode, target string, at int64, mints ...MintedPair) Fault {
	return Fault{Index: index, Kind: FaultRequest, Target: target, Request: mode, Keys: []int16{22}, StartMillis: at, EndMillis: at + 100,
		Hit: &RequestHit{Key: 22, Version: 4, API: "InitProducerId", AtMillis: at, TxnID: "controller", Mints: mints}}
}

// TestCheckAttributesEveryFence shows Check a hand-made fence of m3's 7:2
// for each cause, and the cause each must get; SelfFenced counts own late
// copies and the unexplained.
func TestCheckAttributesEveryFence(t *testing.T) {
	for _, tc := range []struct {
		name     string
		add      func(h *history)
		cause    string
		by       string
		evidence string
	}{
		{"rival acquired the next pair", func(h *history) {
			h.in.Events = append(h.in.Events, Event{Kind: EventAcquired, WallMillis: 15000, Member: "m1", Incarnation: 2, Role: h.role, Token: "7:3"})
		}, FenceRivalAcquired, "m1", "pair 7:3"},
		{"rival acquired the pair after next: the coordinator aborted the open transaction under the next", func(h *history) {
			h.in.Events = append(h.in.Events, Event{Kind: EventAcquired, WallMillis: 9600, Member: "m1", Incarnation: 2, Role: h.role, Token: "7:4"})
		}, FenceRivalAcquired, "m1", "pair 7:4, after the coordinator's abort of the open transaction under the epoch before"},
		{"the pair after next, the abort set off by a rival's copy that went nowhere", func(h *history) {
			h.in.Events = append(h.in.Events, Event{Kind: EventAcquired, WallMillis: 9600, Member: "m1", Incarnation: 2, Role: h.role, Token: "7:4"})
			h.in.Mints = append(h.in.Mints, Mint{Member: "m2", TxnID: h.role, Fault: RequestResetHold, Code: 51, MintedPair: MintedPair{Producer: -1, Epoch: -1, AtMillis: 9450}})
		}, FenceRivalLateCopy, "m2's InitProducerId under a reset-hold fault (answered code 51, to the client false)",
			"pair 7:4, after the coordinator's abort of the open transaction under the epoch before; the abort set off by a copy answered code 51"},
		{"the pair after next, the abort set off by the member's own copy", func(h *history) {
			h.in.Events = append(h.in.Events, Event{Kind: EventAcquired, WallMillis: 9600, Member: "m1", Incarnation: 2, Role: h.role, Token: "7:4"})
			h.in.Mints = append(h.in.Mints,
				Mint{Member: "m1", TxnID: h.role, Code: 51, MintedPair: MintedPair{Producer: -1, Epoch: -1, AtMillis: 9460, ToClient: true}},
				Mint{Member: "m3", TxnID: h.role, Code: 51, MintedPair: MintedPair{Producer: -1, Epoch: -1, AtMillis: 9450}})
		}, FenceOwnLateCopy, "m3's InitProducerId (answered code 51, to the client false)",
			"pair 7:4, after the coordinator's abort of the open transaction under the epoch before; the abort set off by a copy answered code 51"},
		{"the pair after next, the abort set off by the rival's own first attempt", func(h *history) {
			h.in.Events = append(h.in.Events, Event{Kind: EventAcquired, WallMillis: 9600, Member: "m1", Incarnation: 2, Role: h.role, Token: "7:4"})
			h.in.Mints = append(h.in.Mints, Mint{Member: "m1", TxnID: h.role, Code: 51, MintedPair: MintedPair{Producer: -1, Epoch: -1, AtMillis: 9450, ToClient: true}})
		}, FenceRivalAcquired, "m1", "pair 7:4, after the coordinator's abort of the open transaction under the epoch before"},
		{"rival wrote a lease under the next pair, its acquired event lost", func(h *history) {
			h.lease("m2", "7:3")
		}, FenceRivalAcquired, "m2", "pair 7:3 (lease record)"},
		{"rival acquired a newer term within the copy life, no pair", func(h *history) {
			h.in.Events = append(h.in.Events, Event{Kind: EventAcquired, WallMillis: 15000, Member: "m1", Incarnation: 2, Role: h.role, Token: "9:0"})
		}, FenceRivalAcquired, "m1", "time"},
		{"rival's held InitProducerId minted the next pair late", func(h *history) {
			h.in.Faults = append(h.in.Faults, initFault(5, RequestHold, "m1", 8000,
				MintedPair{Producer: 7, Epoch: 3, AtMillis: 9450}))
			// m1 acquires far later, after it waited the copy out: not the cause.
			h.in.Events = append(h.in.Events, Event{Kind: EventAcquired, WallMillis: 30000, Member: "m1", Incarnation: 1, Role: h.role, Token: "7:4"})
		}, FenceRivalLateCopy, "fault 5 (hold of InitProducerId, member m1)", "pair 7:3"},
		{"rival's reset-hold released between the acquisition and the fence, no pair", func(h *history) {
			f := initFault(6, RequestResetHold, "m2", 8000)
			f.Hit.ReleasedMillis, f.Hit.ClientGone = 9400, true
			h.in.Faults = append(h.in.Faults, f)
		}, FenceRivalLateCopy, "fault 6 (reset-hold of InitProducerId, member m2)", "time"},
		{"own held InitProducerId minted the next pair late", func(h *history) {
			h.in.Faults = append(h.in.Faults, initFault(7, RequestHold, "m3", 8500,
				MintedPair{Producer: 7, Epoch: 2, AtMillis: 8600, ToClient: true},
				MintedPair{Producer: 7, Epoch: 3, AtMillis: 9450}))
		}, FenceOwnLateCopy, "fault 7 (hold of InitProducerId, member m3)", "pair 7:3"},
		{"own duplicate's second copy minted the next pair", func(h *history) {
			h.in.Faults = append(h.in.Faults, initFault(8, RequestDuplicate, "m3", 8800,
				MintedPair{Producer: 7, Epoch: 2, AtMillis: 8810, ToClient: true},
				MintedPair{Producer: 7, Epoch: 3, AtMillis: 8820}))
		}, FenceFaultMade, "fault 8 (duplicate of InitProducerId, member m3)", "pair 7:3"},
		{"a copy of another role's InitProducerId is no cause", func(h *history) {
			f := initFault(9, RequestLoseAnswer, "m1", 9000)
			f.Hit.TxnID = "other-role"
			h.in.Faults = append(h.in.Faults, f)
		}, FenceUnexplained, "", ""},
		{"a rival acquired before the fenced term began is no cause", func(h *history) {
			h.in.Events = append(h.in.Events, Event{Kind: EventAcquired, WallMillis: 8000, Member: "m1", Incarnation: 2, Role: h.role, Token: "9:0"})
		}, FenceUnexplained, "", ""},
		{"the mint log shows a rival's answered mint of the next pair", func(h *history) {
			h.in.Mints = append(h.in.Mints, Mint{Member: "m2", TxnID: h.role, MintedPair: MintedPair{Producer: 7, Epoch: 3, AtMillis: 9400, ToClient: true}})
		}, FenceRivalAcquired, "m2", "pair 7:3 (mint log)"},
		{"the mint log shows the member's own copy of the next pair, no fault", func(h *history) {
			h.in.Mints = append(h.in.Mints,
				Mint{Member: "m3", TxnID: h.role, MintedPair: MintedPair{Producer: 7, Epoch: 2, AtMillis: 8800, ToClient: true}},
				Mint{Member: "m3", TxnID: h.role, MintedPair: MintedPair{Producer: 7, Epoch: 3, AtMillis: 9000}})
		}, FenceOwnLateCopy, "m3's InitProducerId (7:3, answer to the client false)", "pair 7:3 (mint log)"},
		{"the mint log shows the second answer of the member's duplicated InitProducerId", func(h *history) {
			h.in.Faults = append(h.in.Faults, initFault(10, RequestDuplicate, "m3", 8800))
			h.in.Mints = append(h.in.Mints,
				Mint{Member: "m3", TxnID: h.role, Fault: RequestDuplicate, MintedPair: MintedPair{Producer: 7, Epoch: 2, AtMillis: 8810, ToClient: true}},
				Mint{Member: "m3", TxnID: h.role, Fault: RequestDuplicate, MintedPair: MintedPair{Producer: 7, Epoch: 3, AtMillis: 8820}})
		}, FenceFaultMade, "m3's InitProducerId under a duplicate fault (7:3, answer to the client false)", "pair 7:3 (mint log)"},
		{"a fault of a non-transactional InitProducerId is no cause", func(h *history) {
			f := initFault(11, RequestLoseAnswer, "m1", 9000)
			f.Hit.TxnID = ""
			h.in.Faults = append(h.in.Faults, f)
		}, FenceUnexplained, "", ""},
		{"the mint log shows a rival's copy under a new producer id in the window", func(h *history) {
			h.in.Mints = append(h.in.Mints, Mint{Member: "m1", TxnID: h.role, MintedPair: MintedPair{Producer: 12, Epoch: 0, AtMillis: 9300}})
		}, FenceRivalLateCopy, "m1's InitProducerId (12:0, answer to the client false)", "time (mint log)"},
		{"nothing", func(h *history) {}, FenceUnexplained, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := fenceHistory(t)
			tc.add(h)
			r := Check(h.in)
			if len(r.Fences) != 1 {
				t.Fatalf("Check: %d fences attributed; want 1: %+v", len(r.Fences), r.Fences)
			}
			f := r.Fences[0]
			if f.Cause != tc.cause || f.By != tc.by || f.Evidence != tc.evidence {
				t.Fatalf("the fence of m3's 7:2 = %s by %q (%s); want %s by %q (%s)", f.Cause, f.By, f.Evidence, tc.cause, tc.by, tc.evidence)
			}
			wantFault := map[string]int{"rival's held InitProducerId minted the next pair late": 5,
				"rival's reset-hold released between the acquisition and the fence, no pair": 6,
				"own held InitProducerId minted the next pair late":                          7, "own duplicate's second copy minted the next pair": 8,
				"the mint log shows the second answer of the member's duplicated InitProducerId": 10}
			want, ok := wantFault[tc.name]
			if !ok {
				want = -1
			}
			if f.Fault != want {
				t.Errorf("the fence's fault = %d; want %d", f.Fault, want)
			}
			self := 0
			if tc.cause == FenceOwnLateCopy || tc.cause == FenceUnexplained {
				self = 1
			}
			var got FenceCauses
			got.add(tc.cause)
			if r.SelfFenced != self || r.FenceCauses != got || r.Refused != 1 {
				t.Fatalf("Check: refused %d, self-fenced %d, causes %+v; want 1, %d, %+v", r.Refused, r.SelfFenced, r.FenceCauses, self, got)
			}
		})
	}
}

// TestSummaryPrintsEveryFenceCause: the summary table names each class of
// fence with its count.
func TestSummaryPrintsEveryFenceCause(t *testing.T) {
	h := fenceHistory(t)
	h.in.Faults = append(h.in.Faults, initFault(7, RequestHold, "m3", 8500, MintedPair{Producer: 7, Epoch: 3, AtMillis: 9450}))
	r := Check(h.in)
	var b strings.Builder
	if err := NewSummary(&RunInfo{RunID: "r"}, r).WriteTable(&b); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"1 self-fenced", "rival acquired 0, rival late copy 0, own late copy 1, fault-made 0, unexplained 0",
		"SELF-FENCE own-late-copy: m3/1 controller under 7:2 at 00:00:09.500, by fault 7 (hold of InitProducerId, member m3) (pair 7:3, fault 7)"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("summary lacks %q:\n%s", want, b.String())
		}
	}
}

// TestMintLogKeepsAnErrorAnswer: an InitProducerId answered with an error
// minted no pair, and the mint log keeps it with its code (the
// coordinator may have aborted a transaction on it).
func TestMintLogKeepsAnErrorAnswer(t *testing.T) {
	var got []Mint
	w := &mintWatch{version: 4, txnID: "controller", onMint: func(m Mint) { got = append(got, m) }}
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(4)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = 51, -1, -1
	w.noteMint(kafkacodes.AppendResponse(nil, 9, resp), false)
	resp.ErrorCode, resp.ProducerID, resp.ProducerEpoch = 0, 7, 4
	w.noteMint(kafkacodes.AppendResponse(nil, 10, resp), true)
	if len(got) != 2 || got[0].Code != 51 || got[0].Token() != "-1:-1" || got[0].ToClient || got[0].TxnID != "controller" ||
		got[1].Code != 0 || got[1].Token() != "7:4" || !got[1].ToClient {
		t.Fatalf("mint log = %+v; want the error answer (code 51, no pair), then 7:4 to the client", got)
	}
}
