package chaos

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"math"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkacodes"
)

// frameBroker is a fake Kafka broker for the Kafka-aware proxy: it answers
// each request frame with its correlation id and the request's body, and
// records every request it applied, in order.
type frameBroker struct {
	addr    string
	mu      sync.Mutex
	applied []appliedRequest
}

type appliedRequest struct {
	key  int16
	corr int32
	body string
}

func newFrameBroker(t *testing.T) *frameBroker {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := &frameBroker{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var conns sync.Map
	t.Cleanup(func() {
		ln.Close()
		conns.Range(func(k, _ any) bool { k.(net.Conn).Close(); return true })
		wg.Wait()
	})
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
					key, _, corr, err := requestHeader(frame)
					if err != nil {
						return
					}
					body := frame[12:]
					b.mu.Lock()
					b.applied = append(b.applied, appliedRequest{key: key, corr: corr, body: string(body)})
					b.mu.Unlock()
					answer := binary.BigEndian.AppendUint32(nil, uint32(4+len(body)))
					answer = binary.BigEndian.AppendUint32(answer, uint32(corr))
					if _, err := conn.Write(append(answer, body...)); err != nil {
						return
					}
				}
			})
		}
	})
	return b
}

// count returns how many times the broker applied the request of body.
func (b *frameBroker) count(body string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, a := range b.applied {
		if a.body == body {
			n++
		}
	}
	return n
}

// request builds a request frame of key (version 3), with body.
func request(key int16, corr int32, body string) []byte {
	frame := binary.BigEndian.AppendUint32(nil, uint32(8+len(body)))
	frame = binary.BigEndian.AppendUint16(frame, uint16(key))
	frame = binary.BigEndian.AppendUint16(frame, 3)
	frame = binary.BigEndian.AppendUint32(frame, uint32(corr))
	return append(frame, body...)
}

// kafkaClient is one client connection through the proxy.
type kafkaClient struct {
	conn net.Conn
	r    *bufio.Reader
}

func dialKafka(t *testing.T, p *Proxy) *kafkaClient {
	t.Helper()
	conn, err := net.Dial("tcp", p.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &kafkaClient{conn: conn, r: bufio.NewReader(conn)}
}

func (c *kafkaClient) send(t *testing.T, key int16, corr int32, body string) {
	t.Helper()
	if _, err := c.conn.Write(request(key, corr, body)); err != nil {
		t.Fatal(err)
	}
}

// answer reads one answer within timeout: its correlation id and body.
func (c *kafkaClient) answer(timeout time.Duration) (int32, string, error) {
	_ = c.conn.SetReadDeadline(time.Now().Add(timeout))
	frame, err := readFrame(c.r)
	if err != nil {
		return 0, "", err
	}
	corr, err := responseCorrelation(frame)
	return corr, string(frame[8:]), err
}

func newKafkaProxy(t *testing.T) (*Proxy, *frameBroker) {
	t.Helper()
	b := newFrameBroker(t)
	p, err := NewKafkaProxy("127.0.0.1:0", b.addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p, b
}

const endTxn, metadata = 26, 3

func TestKafkaProxyForwardsAndCounts(t *testing.T) {
	p, _ := newKafkaProxy(t)
	c := dialKafka(t, p)
	c.send(t, metadata, 1, "m")
	c.send(t, endTxn, 2, "e")
	for want := int32(1); want <= 2; want++ {
		if corr, _, err := c.answer(5 * time.Second); err != nil || corr != want {
			t.Fatalf("answer = %d, %v; want %d in order", corr, err, want)
		}
	}
	got := p.Requests()
	if len(got) != 2 || got[0].API != "Metadata" || got[1].API != "EndTxn" || got[1].Count != 1 || got[1].Version != 3 {
		t.Fatalf("Requests() = %+v; want Metadata v3 once and EndTxn v3 once", got)
	}
}

func TestKafkaProxyDelaysOneRequest(t *testing.T) {
	p, _ := newKafkaProxy(t)
	armed := Arm(RequestFault{Mode: RequestDelay, Keys: []int16{endTxn}, Delay: 400 * time.Millisecond}, p)
	c := dialKafka(t, p)
	c.send(t, metadata, 1, "m")
	if _, _, err := c.answer(5 * time.Second); err != nil {
		t.Fatal(err)
	}
	if _, ok := armed.Hit(); ok {
		t.Fatal("a Metadata request took a fault armed for EndTxn")
	}
	start := time.Now()
	c.send(t, endTxn, 2, "e")
	if corr, _, err := c.answer(5 * time.Second); err != nil || corr != 2 {
		t.Fatalf("answer = %d, %v", corr, err)
	}
	if took := time.Since(start); took < 400*time.Millisecond {
		t.Fatalf("the delayed EndTxn was answered after %v; want 400ms or more", took)
	}
	if hit, ok := armed.Hit(); !ok || hit.API != "EndTxn" {
		t.Fatalf("Hit() = %+v, %v; want the EndTxn", hit, ok)
	}
	start = time.Now()
	c.send(t, endTxn, 3, "e2")
	if _, _, err := c.answer(5 * time.Second); err != nil || time.Since(start) > 300*time.Millisecond {
		t.Fatalf("the next EndTxn: %v after %v; want a prompt answer (the fault takes one request)", err, time.Since(start))
	}
}

func TestKafkaProxyDuplicatesOneRequestAndSwallowsTheSecondAnswer(t *testing.T) {
	p, b := newKafkaProxy(t)
	Arm(RequestFault{Mode: RequestDuplicate, Keys: []int16{endTxn}}, p)
	c := dialKafka(t, p)
	c.send(t, endTxn, 7, "commit")
	c.send(t, metadata, 8, "m")
	for _, want := range []int32{7, 8} {
		if corr, _, err := c.answer(5 * time.Second); err != nil || corr != want {
			t.Fatalf("answer = %d, %v; want %d (one answer each, in order)", corr, err, want)
		}
	}
	if n := b.count("commit"); n != 2 {
		t.Fatalf("the broker applied the duplicated request %d times; want 2", n)
	}
}

func TestKafkaProxyLosesTheAnswerOfAnAppliedRequest(t *testing.T) {
	p, b := newKafkaProxy(t)
	Arm(RequestFault{Mode: RequestLoseAnswer, Keys: []int16{endTxn}}, p)
	c := dialKafka(t, p)
	c.send(t, endTxn, 7, "commit")
	if corr, _, err := c.answer(5 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("answer = %d, %v; want the connection reset, no answer", corr, err)
	}
	if n := b.count("commit"); n != 1 {
		t.Fatalf("the broker applied the request %d times; want 1", n)
	}
}

func TestKafkaProxyHoldsARequestUntilTheClientResentIt(t *testing.T) {
	p, b := newKafkaProxy(t)
	armed := Arm(RequestFault{Mode: RequestHold, Keys: []int16{endTxn}, MaxHold: time.Minute}, p)
	first := dialKafka(t, p)
	first.send(t, endTxn, 7, "commit")
	if _, _, err := first.answer(300 * time.Millisecond); !isTimeout(err) {
		t.Fatalf("answer of a held request: %v; want none (a timeout)", err)
	}
	if n := b.count("commit"); n != 0 {
		t.Fatalf("the broker applied a held request %d times; want 0", n)
	}
	first.conn.Close() // the client gives up, and resends on a new connection
	second := dialKafka(t, p)
	second.send(t, endTxn, 1, "commit")
	if corr, _, err := second.answer(5 * time.Second); err != nil || corr != 1 {
		t.Fatalf("answer of the resent request = %d, %v", corr, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.count("commit") < 2 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := b.count("commit"); n != 2 {
		t.Fatalf("the broker applied the request %d times; want 2 (the resend, then the held one, late)", n)
	}
	b.mu.Lock()
	order := slices.Clone(b.applied)
	b.mu.Unlock()
	if order[0].corr != 1 || order[1].corr != 7 {
		t.Fatalf("applied %+v; want the resend (corr 1) before the held request (corr 7)", order)
	}
	if hit, ok := armed.Hit(); !ok || !hit.ClientGone || !hit.Resent || hit.ReleasedMillis == 0 {
		t.Fatalf("Hit() = %+v, %v; want released late, after the client closed and resent", hit, ok)
	}
}

// TestKafkaProxyResetsAndReleasesAfterTheResend: reset-hold resets the
// client's connection at once (a broken connection, not a timeout), and
// the broker applies the request only after two more requests of its key
// went through: the resend, and the next one.
func TestKafkaProxyResetsAndReleasesAfterTheResend(t *testing.T) {
	p, b := newKafkaProxy(t)
	armed := Arm(RequestFault{Mode: RequestResetHold, Keys: []int16{endTxn}, MaxHold: time.Minute}, p)
	first := dialKafka(t, p)
	first.send(t, endTxn, 7, "commit")
	if corr, _, err := first.answer(5 * time.Second); err == nil || isTimeout(err) {
		t.Fatalf("answer = %d, %v; want the connection reset at once, no answer", corr, err)
	}
	second := dialKafka(t, p)
	second.send(t, endTxn, 1, "commit")
	if corr, _, err := second.answer(5 * time.Second); err != nil || corr != 1 {
		t.Fatalf("answer of the resent request = %d, %v", corr, err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := b.count("commit"); n != 1 {
		t.Fatalf("the broker applied %d requests after the resend; want 1 (the held one waits for one more)", n)
	}
	second.send(t, endTxn, 2, "commit")
	if corr, _, err := second.answer(5 * time.Second); err != nil || corr != 2 {
		t.Fatalf("answer of the next request = %d, %v", corr, err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for b.count("commit") < 3 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	b.mu.Lock()
	order := slices.Clone(b.applied)
	b.mu.Unlock()
	if len(order) != 3 || order[2].corr != 7 {
		t.Fatalf("applied %+v; want the resend, the next request, then the held one (corr 7)", order)
	}
	if hit, ok := armed.Hit(); !ok || !hit.ClientGone || !hit.Resent || hit.ReleasedMillis == 0 {
		t.Fatalf("Hit() = %+v, %v; want released late, after the resend", hit, ok)
	}
}

func TestPlanTakesTurnsAtTheRequestKeysAndModes(t *testing.T) {
	keys := []int16{endTxn, metadata, 22}
	steps, err := NewPlan(PlanConfig{Seed: 3, Duration: 10 * time.Minute, Members: 3, Roles: 2, Faults: []string{FaultRequest},
		Lease: 3 * time.Second, MeanGap: 5 * time.Second, RequestKeys: keys, RequestGap: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	pairs := make(map[string]bool)
	for _, s := range steps {
		if s.Kind != FaultRequest || !slices.Contains(keys, s.Key) || s.Hold <= 0 || (s.Request == RequestDelay) != (s.Delay > 0) {
			t.Fatalf("step %+v: want a request fault of one of %v, with a hold, and a delay for the delay mode only", s, keys)
		}
		pairs[fmt.Sprintf("%d/%s", s.Key, s.Request)] = true
	}
	// Metadata has no code that Kafka answers to an applied request: its
	// applied-error turns are error-code ones.
	if want := len(keys)*len(RequestModes) - 1; len(pairs) != want {
		t.Fatalf("%d steps hold %d (key, mode) pairs: %v; want all %d", len(steps), len(pairs), pairs, want)
	}
}

func TestParseRequestKeys(t *testing.T) {
	got, err := ParseRequestKeys("EndTxn, initproducerid,3,EndTxn")
	if err != nil || !slices.Equal(got, []int16{3, 22, 26}) {
		t.Fatalf("ParseRequestKeys = %v, %v; want [3 22 26]", got, err)
	}
	if got, err := ParseRequestKeys("library"); err != nil || len(got) != len(LibraryRequestKeys) {
		t.Fatalf("ParseRequestKeys(library) = %v, %v", got, err)
	}
	if _, err := ParseRequestKeys("EndTxx"); err == nil || !strings.Contains(err.Error(), "EndTxx") {
		t.Fatalf("ParseRequestKeys(EndTxx) error = %v; want one that names it", err)
	}
}

func TestCheckCountsRequestFaultsByAPI(t *testing.T) {
	in := clean(t).in
	in.Faults = append(in.Faults,
		Fault{Index: 5, Kind: FaultRequest, Target: "m1", Request: RequestHold, Keys: []int16{endTxn}, Hit: &RequestHit{Key: endTxn, API: "EndTxn", ClientGone: true}},
		Fault{Index: 6, Kind: FaultRequest, Target: "m2", Request: RequestDuplicate, Keys: []int16{endTxn}, Hit: &RequestHit{Key: endTxn, API: "EndTxn"}},
		Fault{Index: 7, Kind: FaultRequest, Target: "m2", Request: RequestDelay, Keys: []int16{metadata}})
	r := Check(in)
	if len(r.RequestFaults) != 2 {
		t.Fatalf("RequestFaults = %+v; want Metadata and EndTxn", r.RequestFaults)
	}
	m, e := r.RequestFaults[0], r.RequestFaults[1]
	if m.API != "Metadata" || m.Armed != 1 || m.Fired != 0 || e.API != "EndTxn" || e.Armed != 2 || e.Fired != 2 || e.Late != 1 ||
		e.ByMode[string(RequestHold)] != 1 || e.ByMode[string(RequestDuplicate)] != 1 {
		t.Fatalf("RequestFaults = %+v", r.RequestFaults)
	}
	var table strings.Builder
	if err := NewSummary(&RunInfo{}, r).WriteTable(&table); err != nil || !strings.Contains(table.String(), "EndTxn 2/2 (hold 1, duplicate 1; 1 applied late)") {
		t.Fatalf("summary table: %v\n%s", err, table.String())
	}
}

func TestKafkaProxyGivesEachArmedFaultARequestOfItsOwn(t *testing.T) {
	p, b := newKafkaProxy(t)
	first := Arm(RequestFault{Mode: RequestDuplicate, Keys: []int16{endTxn}}, p)
	second := Arm(RequestFault{Mode: RequestDuplicate, Keys: []int16{endTxn}}, p)
	c := dialKafka(t, p)
	c.send(t, endTxn, 1, "a")
	c.send(t, endTxn, 2, "b")
	c.send(t, endTxn, 3, "c")
	for want := int32(1); want <= 3; want++ {
		if corr, _, err := c.answer(5 * time.Second); err != nil || corr != want {
			t.Fatalf("answer = %d, %v; want %d", corr, err, want)
		}
	}
	if b.count("a") != 2 || b.count("b") != 2 || b.count("c") != 1 {
		t.Fatalf("applied a %d, b %d, c %d times; want 2, 2, 1", b.count("a"), b.count("b"), b.count("c"))
	}
	if _, ok := first.Hit(); !ok {
		t.Fatal("the first fault took no request")
	}
	if _, ok := second.Hit(); !ok {
		t.Fatal("the second fault took no request")
	}
}

// TestReadFrameBoundsTheSizeAndDecodesTheHeader: a frame size below 4,
// above maxFrame, or negative as Kafka's int32 (its unsigned bits above
// maxFrame) is an error that names the size, read before any byte of the
// body; a request header's key, version and correlation id are Kafka's
// signed int16, int16 and int32, a negative correlation id included.
func TestReadFrameBoundsTheSizeAndDecodesTheHeader(t *testing.T) {
	for _, size := range []uint32{0, 3, maxFrame + 1, 0xffffffff} {
		var raw [4]byte
		binary.BigEndian.PutUint32(raw[:], size)
		if frame, err := readFrame(bufio.NewReader(strings.NewReader(string(raw[:])))); err == nil || !strings.Contains(err.Error(), fmt.Sprint(size)) {
			t.Errorf("readFrame(size %#x) = %d bytes, %v; want an error that names the size", size, len(frame), err)
		}
	}
	raw := binary.BigEndian.AppendUint32(nil, 10)
	raw = binary.BigEndian.AppendUint16(raw, 22)      // InitProducerId
	raw = binary.BigEndian.AppendUint16(raw, 5)       // v5
	raw = binary.BigEndian.AppendUint32(raw, 1<<32-2) // correlation id -2
	raw = append(raw, 0xab, 0xcd)
	frame, err := readFrame(bufio.NewReader(strings.NewReader(string(raw))))
	if err != nil || len(frame) != 14 {
		t.Fatalf("readFrame(a 10-byte request) = %d bytes, %v; want 14 bytes", len(frame), err)
	}
	if key, version, corr, err := requestHeader(frame); err != nil || key != 22 || version != 5 || corr != -2 {
		t.Errorf("requestHeader = key %d, v%d, correlation id %d, %v; want 22, v5, -2", key, version, corr, err)
	}
	response := binary.BigEndian.AppendUint32(binary.BigEndian.AppendUint32(nil, 4), 1<<31) // correlation id MinInt32
	if corr, err := responseCorrelation(response); err != nil || corr != math.MinInt32 {
		t.Errorf("responseCorrelation = %d, %v; want %d", corr, err, math.MinInt32)
	}
}

// kafkaRequest builds a real request frame of req, at its version.
func kafkaRequest(req kmsg.Request, corr int32) []byte {
	return kmsg.NewRequestFormatter(kmsg.FormatterClientID("test")).AppendRequest(nil, req, corr)
}

// appliedKeys returns the API keys of the requests the broker applied, in
// order.
func (b *frameBroker) appliedKeys() []int16 {
	b.mu.Lock()
	defer b.mu.Unlock()
	var keys []int16
	for _, a := range b.applied {
		keys = append(keys, a.key)
	}
	return keys
}

// TestKafkaProxyAnswersARequestWithAnErrorCode: in error-code mode the
// proxy answers a pipelined EndTxn with the armed code, in its place among
// the connection's answers, and the broker never sees the EndTxn (an
// ApiVersions of the same correlation id takes its place); in
// applied-error mode the broker applies the EndTxn and the client gets
// the code.
func TestKafkaProxyAnswersARequestWithAnErrorCode(t *testing.T) {
	for _, tc := range []struct {
		mode    RequestMode
		code    *kerr.Error
		applied []int16
	}{
		{RequestErrorCode, kerr.ConcurrentTransactions, []int16{metadata, 18, metadata}},
		{RequestAppliedError, kerr.CoordinatorNotAvailable, []int16{metadata, endTxn, metadata}},
	} {
		t.Run(string(tc.mode), func(t *testing.T) {
			p, b := newKafkaProxy(t)
			armed := Arm(RequestFault{Mode: tc.mode, Keys: []int16{endTxn}, Code: tc.code.Code}, p)
			c := dialKafka(t, p)
			end := kmsg.NewPtrEndTxnRequest()
			end.SetVersion(4)
			end.TransactionalID, end.ProducerID, end.ProducerEpoch, end.Commit = "role", 7, 3, true
			c.send(t, metadata, 1, "m")
			if _, err := c.conn.Write(kafkaRequest(end, 2)); err != nil {
				t.Fatal(err)
			}
			c.send(t, metadata, 3, "m2")
			for want := int32(1); want <= 3; want++ {
				corr, body, err := c.answer(5 * time.Second)
				if err != nil || corr != want {
					t.Fatalf("answer = %d, %v; want %d, in order", corr, err, want)
				}
				if corr != 2 {
					continue
				}
				resp := kmsg.NewPtrEndTxnResponse()
				resp.SetVersion(4)
				if err := resp.ReadFrom([]byte(body)[1:]); err != nil { // the flexible header's tags
					t.Fatalf("the EndTxn answer does not decode: %v", err)
				}
				if resp.ErrorCode != tc.code.Code {
					t.Fatalf("the EndTxn answer's code = %d; want %d (%s)", resp.ErrorCode, tc.code.Code, tc.code.Message)
				}
			}
			if got := b.appliedKeys(); !slices.Equal(got, tc.applied) {
				t.Fatalf("the broker applied keys %v; want %v", got, tc.applied)
			}
			if hit, ok := armed.Hit(); !ok || hit.Code != tc.code.Code || hit.Err != "" {
				t.Fatalf("Hit() = %+v, %v; want the EndTxn, answered with code %d", hit, ok, tc.code.Code)
			}
		})
	}
}

// TestPlanDrawsEveryCodeOfAKey: the error-code steps of a key take turns
// at its codes, and its applied-error steps at the codes Kafka answers to
// an applied request.
func TestPlanDrawsEveryCodeOfAKey(t *testing.T) {
	steps, err := NewPlan(PlanConfig{Seed: 5, Duration: 60 * time.Minute, Members: 3, Roles: 2, Faults: []string{FaultRequest},
		Lease: 3 * time.Second, MeanGap: 5 * time.Second, RequestKeys: []int16{endTxn}, RequestGap: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	seen := map[RequestMode]map[int16]bool{RequestErrorCode: {}, RequestAppliedError: {}}
	for _, s := range steps {
		if s.Request == RequestErrorCode || s.Request == RequestAppliedError {
			if s.Code == 0 {
				t.Fatalf("step %+v: an error-code step without a code", s)
			}
			seen[s.Request][s.Code] = true
		}
	}
	for mode, codes := range map[RequestMode][]*kerr.Error{RequestErrorCode: kafkacodes.Of(endTxn), RequestAppliedError: kafkacodes.AppliedOf(endTxn)} {
		for _, code := range codes {
			if !seen[mode][code.Code] {
				t.Errorf("no %s step of EndTxn with code %s", mode, code.Message)
			}
		}
	}
}
