package chaos

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/krabka-io/krabka-streams-go/internal/kafkacodes"
)

// RequestMode is what a request fault does to the one Kafka request it
// takes (see [RequestFault]).
type RequestMode string

const (
	// RequestDelay forwards the request after the fault's Delay; the later
	// requests of its connection wait behind it, as on a slow link.
	RequestDelay RequestMode = "delay"

	// RequestLoseAnswer forwards the request, swallows its answer and
	// resets the client's connection: the broker applied the request, and
	// the client cannot know it.
	RequestLoseAnswer RequestMode = "lose-answer"

	// RequestHold holds the request (and the later requests of its
	// connection) until the client gave up on the connection and sent a
	// request of the same API key again on another one, and then sends it
	// to the broker, applied late; its answer goes nowhere. A client that
	// keeps the connection past MaxHold gets it forwarded then, late.
	RequestHold RequestMode = "hold"

	// RequestDuplicate forwards the request twice, and swallows the second
	// answer.
	RequestDuplicate RequestMode = "duplicate"

	// RequestResetHold resets the client's connection at once, without an
	// answer (the client sees a broken connection, not a timeout), holds
	// the request until resetHoldAfter more requests of its API key went
	// through the proxy (the client's resend, and the next one) or
	// MaxHold, and then sends it to the broker, applied late: Kafka
	// applies a request that it read whole after its connection closed,
	// and a proxy in front of it may still deliver one whose client side
	// broke.
	RequestResetHold RequestMode = "reset-hold"

	// RequestErrorCode answers the request with the fault's Code, without
	// applying it: the proxy builds the answer of the request's key and
	// version (internal/kafkacodes.ErrorResponse: the code in every error
	// field, for every topic, partition or id the request names) and sends
	// the broker, in the request's place, an ApiVersions request of the
	// same correlation id, whose answer it replaces with the built one.
	// The broker applies nothing, and the answer keeps its place among
	// the answers of the connection.
	RequestErrorCode RequestMode = "error-code"

	// RequestAppliedError forwards the request, and replaces its answer
	// with one that carries the fault's Code: the broker applied the
	// request and answered with an error. Kafka does so for a Produce
	// whose batch is in the leader's log but short of replicas
	// (REQUEST_TIMED_OUT, NOT_ENOUGH_REPLICAS_AFTER_APPEND), and for a
	// request of a transaction coordinator whose append to the transaction
	// log failed its replication after it was written
	// (COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR): internal/kafkacodes's
	// Applied. A client that reads "not applied" into such an answer
	// reports a write as not committed while it may be.
	RequestAppliedError RequestMode = "applied-error"
)

// resetHoldAfter is the number of requests of its key that pass before a
// request held by RequestResetHold is released.
const resetHoldAfter = 2

// RequestModes lists every mode, in the order of the summary.
var RequestModes = []RequestMode{RequestDelay, RequestLoseAnswer, RequestHold, RequestDuplicate, RequestResetHold,
	RequestErrorCode, RequestAppliedError}

// LibraryRequestKeys lists the API keys of the requests that package
// coordination sends over KafkaTransport (docs/safety.md lists them with
// their versions): the default of `krabka-chaos run --request-keys`.
var LibraryRequestKeys = []int16{
	kmsg.Produce.Int16(), kmsg.Fetch.Int16(), kmsg.ListOffsets.Int16(), kmsg.Metadata.Int16(),
	kmsg.FindCoordinator.Int16(), kmsg.ApiVersions.Int16(), kmsg.CreateTopics.Int16(), kmsg.InitProducerID.Int16(),
	kmsg.AddPartitionsToTxn.Int16(), kmsg.EndTxn.Int16(), kmsg.DescribeConfigs.Int16(), kmsg.DescribeTransactions.Int16(),
}

// APIName returns the name of an API key as Kafka spells it
// (kmsg.NameForKey), or "key N" for a key kmsg does not know.
func APIName(key int16) string {
	if name := kmsg.NameForKey(key); name != "" && name != "Unknown" {
		return name
	}
	return "key " + strconv.Itoa(int(key))
}

// ParseRequestKeys parses a comma-separated list of API keys, each a
// number or a name as [APIName] writes it (case-insensitive); "library"
// stands for [LibraryRequestKeys].
func ParseRequestKeys(text string) ([]int16, error) {
	var out []int16
	for part := range strings.SplitSeq(text, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		if part == "library" {
			out = append(out, LibraryRequestKeys...)
			continue
		}
		if n, err := strconv.ParseInt(part, 10, 16); err == nil && n >= 0 {
			out = append(out, int16(n))
			continue
		}
		found := false
		for key := int16(0); key < 100; key++ {
			if strings.EqualFold(kmsg.NameForKey(key), part) {
				out, found = append(out, key), true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("API key %q: want a number or a name such as EndTxn", part)
		}
	}
	if len(out) == 0 {
		return nil, errors.New("no API key")
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// RequestFault is one fault of one Kafka request: the next request of one
// of Keys (any key when empty) that any connection of the armed proxies
// forwards takes it, and no other.
type RequestFault struct {
	Mode RequestMode
	Keys []int16

	// Delay is the delay of RequestDelay. MaxHold bounds RequestHold: the
	// request is forwarded then at the latest.
	Delay, MaxHold time.Duration

	// Code is the error code of RequestErrorCode and RequestAppliedError.
	Code int16
}

// RequestHit says what a request fault did: the request it took, and, for
// a hold, when and how it was released.
type RequestHit struct {
	Key     int16  `json:"key"`
	Version int16  `json:"version"`
	API     string `json:"api"`
	// AtMillis is the host time at which the proxy took the request.
	AtMillis int64 `json:"at"`
	// ReleasedMillis is the host time at which a held request went to the
	// broker (0: not yet, or never: its connection was cut). ClientGone
	// reports that the client had closed the connection by then (the
	// request was applied late), and Resent that the client had sent a
	// request of the same key on another connection by then.
	ReleasedMillis int64 `json:"released,omitempty"`
	ClientGone     bool  `json:"client_gone,omitempty"`
	Resent         bool  `json:"resent,omitempty"`
	// Code is the error code that answered the request (RequestErrorCode,
	// RequestAppliedError), and Err says why the proxy could not build
	// that answer (the request then went on as it was).
	Code int16  `json:"code,omitempty"`
	Err  string `json:"err,omitempty"`
	// TxnID is the transactional id of an InitProducerId (the role), and
	// Mints the pairs that the broker's answers to it carried, each copy
	// of it that the broker applied (see [MintedPair]).
	TxnID string       `json:"txn_id,omitempty"`
	Mints []MintedPair `json:"mints,omitempty"`
}

// MintedPair is the producer id and epoch that the broker answered to one
// copy of a faulted InitProducerId: the pair that copy minted. AtMillis is
// the host time at which the answer reached the proxy (the copy was
// applied at or before it), and ToClient reports that the answer went on
// to the client; an answer that went nowhere (lost, swallowed, late, or
// replaced by an error code) is the pair of a copy the client never saw.
type MintedPair struct {
	Producer int64 `json:"pid"`
	Epoch    int16 `json:"epoch"`
	AtMillis int64 `json:"at"`
	ToClient bool  `json:"to_client,omitempty"`
}

// Token returns the pair as a fencing token's text, "producer:epoch".
func (m MintedPair) Token() string {
	return strconv.FormatInt(m.Producer, 10) + ":" + strconv.FormatInt(int64(m.Epoch), 10)
}

// Mint is one line of the mint log of a run (mints.log): the answer of
// one InitProducerId that passed a member's proxy, faulted or not, with
// the pair it minted or its error code. It is the member's view of each of its mints, as
// the wire carried it: an answer with ToClient false minted a pair that
// the member never saw (a copy applied after the client gave up).
type Mint struct {
	Member string `json:"member"`
	TxnID  string `json:"txn_id"`
	// Fault is the mode of the request fault that took the InitProducerId,
	// empty for none.
	Fault RequestMode `json:"fault,omitempty"`
	// Code is the error code of an answer that minted nothing (its pair
	// is then -1:-1), 0 for a minted pair.
	Code int16 `json:"code,omitempty"`
	MintedPair
}

// OnMint makes the proxy call f with every answer to an InitProducerId
// that it carries (an error answer with its Code), from the goroutine of the answer's
// connection; f must be safe for concurrent use and return soon. Member
// is left empty for f to fill in.
func (p *Proxy) OnMint(f func(Mint)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.onMint = f
}

// OnMint sets [Proxy.OnMint] on every proxy of the member, with the
// member's name filled in.
func (n *MemberNetwork) OnMint(member string, f func(Mint)) {
	for _, proxy := range n.proxies {
		proxy.OnMint(func(m Mint) {
			m.Member = member
			f(m)
		})
	}
}

// mintWatch reads the answers to one InitProducerId of a link; armed is
// the fault that took it, nil for none.
type mintWatch struct {
	armed   *ArmedRequest
	version int16
	txnID   string
	onMint  func(Mint)
}

// watchMint makes the link's answer pump record the pair of every answer
// to an InitProducerId that reaches the broker, in the hit of the fault
// that took it (with its transactional id) and through the proxy's
// OnMint. RequestErrorCode's request never reaches the broker: nothing to
// watch.
func (p *Proxy) watchMint(l *link, frame []byte, corr int32, version int16, armed *ArmedRequest) {
	if armed != nil && armed.fault.Mode == RequestErrorCode {
		return
	}
	p.mu.Lock()
	w := &mintWatch{armed: armed, version: version, onMint: p.onMint}
	p.mu.Unlock()
	if w.armed == nil && w.onMint == nil {
		return
	}
	if req, _, err := kafkacodes.ReadRequest(frame); err == nil {
		if init, ok := req.(*kmsg.InitProducerIDRequest); ok && init.TransactionalID != nil {
			w.txnID = *init.TransactionalID
		}
	}
	if armed != nil {
		armed.update(func(h *RequestHit) { h.TxnID = w.txnID })
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.mints == nil {
		l.mints = make(map[int32]*mintWatch)
	}
	l.mints[corr] = w
}

// noteMint records the pair of an answer to a watched InitProducerId; an
// answer that does not decode, or carries an error, minted nothing.
func (w *mintWatch) noteMint(frame []byte, toClient bool) {
	resp := kmsg.NewPtrInitProducerIDResponse()
	resp.SetVersion(w.version)
	if len(frame) < 8 {
		return
	}
	b := kbin.Reader{Src: frame[8:]} // past the size and the correlation id
	if resp.IsFlexible() {
		for n := b.Uvarint(); n > 0; n-- { // the header's tagged fields
			b.Uvarint()
			b.Span(int(b.Uvarint()))
		}
	}
	if b.Complete() != nil || resp.ReadFrom(b.Src) != nil {
		return
	}
	pair := MintedPair{Producer: resp.ProducerID, Epoch: resp.ProducerEpoch, AtMillis: time.Now().UnixMilli(), ToClient: toClient}
	if resp.ErrorCode != 0 {
		// No pair, but the coordinator may have acted on it: an
		// InitProducerId while a transaction is open aborts it under the
		// next epoch and answers CONCURRENT_TRANSACTIONS. The mint log
		// keeps it.
		if w.onMint != nil {
			m := Mint{TxnID: w.txnID, Code: resp.ErrorCode, MintedPair: MintedPair{Producer: -1, Epoch: -1, AtMillis: pair.AtMillis, ToClient: toClient}}
			if w.armed != nil {
				m.Fault = w.armed.fault.Mode
			}
			w.onMint(m)
		}
		return
	}
	if w.armed != nil {
		w.armed.update(func(h *RequestHit) { h.Mints = append(h.Mints, pair) })
	}
	if w.onMint != nil {
		m := Mint{TxnID: w.txnID, MintedPair: pair}
		if w.armed != nil {
			m.Fault = w.armed.fault.Mode
		}
		w.onMint(m)
	}
}

// ArmedRequest is a request fault armed on the proxies of a member. It is
// safe for concurrent use.
type ArmedRequest struct {
	fault   RequestFault
	proxies []*Proxy

	mu  sync.Mutex
	hit *RequestHit
}

// Hit returns what the fault did so far, and false while no request took
// it.
func (a *ArmedRequest) Hit() (RequestHit, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hit == nil {
		return RequestHit{}, false
	}
	return *a.hit, true
}

// Disarm removes the fault from its proxies if no request took it yet; a
// held request goes on to its release.
func (a *ArmedRequest) Disarm() {
	for _, p := range a.proxies {
		p.mu.Lock()
		p.armed = slices.DeleteFunc(p.armed, func(b *ArmedRequest) bool { return b == a })
		p.mu.Unlock()
	}
}

// take gives the fault to a request of key and version, once.
func (a *ArmedRequest) take(key, version int16) bool {
	if len(a.fault.Keys) > 0 && !slices.Contains(a.fault.Keys, key) {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.hit != nil {
		return false
	}
	a.hit = &RequestHit{Key: key, Version: version, API: APIName(key), AtMillis: time.Now().UnixMilli()}
	return true
}

func (a *ArmedRequest) update(f func(h *RequestHit)) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f(a.hit)
}

// Arm arms a request fault on the proxies. The first matching request on
// any of them takes it. Faults armed together each take a request of
// their own, the earliest armed first.
func Arm(fault RequestFault, proxies ...*Proxy) *ArmedRequest {
	a := &ArmedRequest{fault: fault, proxies: proxies}
	for _, p := range proxies {
		p.mu.Lock()
		p.armed = append(p.armed, a)
		p.mu.Unlock()
	}
	return a
}

// RequestCount is the number of requests of one API key and version that
// a proxy forwarded.
type RequestCount struct {
	Key     int16  `json:"key"`
	Version int16  `json:"version"`
	API     string `json:"api"`
	Count   int64  `json:"count"`
}

// Requests returns the requests the proxy forwarded so far, by API key and
// version, in key and version order (a Kafka-aware proxy only).
func (p *Proxy) Requests() []RequestCount {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]RequestCount, 0, len(p.counts))
	for kv, n := range p.counts {
		out = append(out, RequestCount{Key: kv[0], Version: kv[1], Count: n})
	}
	return SumRequests(out)
}

// maxFrame bounds one Kafka frame the proxy reads (the broker's
// socket.request.max.bytes is 100 MiB).
const maxFrame = 100 << 20

// readFrame reads one size-prefixed Kafka frame, its size included.
func readFrame(r *bufio.Reader) ([]byte, error) {
	var size [4]byte
	if _, err := io.ReadFull(r, size[:]); err != nil {
		return nil, err
	}
	// The size is Kafka's int32; read as its unsigned bits, a negative one
	// is above maxFrame, so one check bounds it before the conversion.
	n := binary.BigEndian.Uint32(size[:])
	if n < 4 || n > maxFrame {
		return nil, fmt.Errorf("chaos: a Kafka frame size of %d bytes (the size field %#x): want 4 to %d", n, n, maxFrame)
	}
	frame := make([]byte, 4+int(n))
	copy(frame, size[:])
	if _, err := io.ReadFull(r, frame[4:]); err != nil {
		return nil, err
	}
	return frame, nil
}

// requestHeader reads the API key, version and correlation id of a request
// frame (4-byte size, then the header); a frame too short for them is an
// error.
func requestHeader(frame []byte) (key, version int16, corr int32, err error) {
	if len(frame) < 12 {
		return 0, 0, 0, fmt.Errorf("chaos: a request frame of %d bytes has no header", len(frame))
	}
	header := kbin.Reader{Src: frame[4:12]}
	return header.Int16(), header.Int16(), header.Int32(), nil
}

// responseCorrelation reads the correlation id of a response frame.
func responseCorrelation(frame []byte) (int32, error) {
	if len(frame) < 8 {
		return 0, fmt.Errorf("chaos: a response frame of %d bytes has no correlation id", len(frame))
	}
	header := kbin.Reader{Src: frame[4:8]}
	return header.Int32(), nil
}

// swallow says what happens to the answers of one correlation id of a
// link: the first pass go to the client, the next drop are swallowed, and
// reset resets the client's connection after the last swallowed one.
type swallow struct {
	pass, drop int
	reset      bool
	// replace, when not nil, goes to the client in place of the first
	// answer (an answer built with an error code).
	replace []byte
}

// resendWait bounds the wait of a held request, after its client closed
// the connection, for the client's resend on another connection.
const resendWait = 5 * time.Second

// lateAnswerWait bounds the wait for the answer of a request released
// late, before the proxy closes its broker connection.
const lateAnswerWait = 10 * time.Second

// serveFrames carries one connection of a Kafka-aware proxy: a reader of
// the client's request frames, a forwarder (this goroutine) that applies
// the armed request fault, and a pump of the broker's answers.
func (p *Proxy) serveFrames(l *link, upstream net.Conn) {
	frames := make(chan []byte, 64)
	var clientErr error
	p.wg.Add(2)
	go func() {
		defer p.wg.Done()
		defer close(frames)
		r := bufio.NewReaderSize(l.client, 64*1024)
		for {
			frame, err := readFrame(r)
			if err != nil {
				clientErr = err
				return
			}
			select {
			case frames <- frame:
			case <-l.done:
				return
			}
		}
	}()
	go func() {
		defer p.wg.Done()
		p.answers(l, upstream)
	}()
	for {
		var frame []byte
		var ok bool
		select {
		case frame, ok = <-frames:
		case <-l.done:
			return
		}
		if !ok {
			if errors.Is(clientErr, io.EOF) {
				if c, isTCP := upstream.(*net.TCPConn); isTCP {
					_ = c.CloseWrite() // the broker closes its side; answers closes the link
				}
				return
			}
			l.close()
			return
		}
		if !p.pass(l) {
			l.close()
			return
		}
		key, version, corr, err := requestHeader(frame)
		if err != nil {
			l.reset()
			return
		}
		p.mu.Lock()
		p.counts[[2]int16{key, version}]++
		p.sent[key]++
		var armed *ArmedRequest
		for i, a := range p.armed {
			if a.take(key, version) {
				armed = a
				p.armed = slices.Delete(p.armed, i, i+1)
				break
			}
		}
		p.mu.Unlock()
		if key == kmsg.InitProducerID.Int16() {
			p.watchMint(l, frame, corr, version, armed)
		}
		if armed == nil {
			if !l.send(upstream, frame) {
				return
			}
			continue
		}
		switch armed.fault.Mode {
		case RequestDelay:
			select {
			case <-time.After(armed.fault.Delay):
			case <-l.done:
				return
			}
			if !l.send(upstream, frame) {
				return
			}
		case RequestDuplicate:
			// Twice on purpose: the broker answers both frames, the
			// first answer goes to the client and the rule swallows the
			// second.
			l.rule(corr, swallow{pass: 1, drop: 1})
			for range 2 {
				if !l.send(upstream, frame) {
					return
				}
			}
		case RequestLoseAnswer:
			l.rule(corr, swallow{drop: 1, reset: true})
			if !l.send(upstream, frame) {
				return
			}
		case RequestHold:
			if !p.hold(l, upstream, frame, key, corr, frames, armed) {
				return
			}
		case RequestResetHold:
			p.resetHold(l, upstream, frame, key, corr, armed)
			return
		case RequestErrorCode, RequestAppliedError:
			if !l.send(upstream, errorCodeFrames(l, frame, corr, armed)) {
				return
			}
		default:
			if !l.send(upstream, frame) {
				return
			}
		}
	}
}

// substituteClient names the ApiVersions request that takes the place of a
// request answered with an error code.
var substituteClient = kmsg.NewRequestFormatter(kmsg.FormatterClientID("krabka-chaos"))

// errorCodeFrames sets the link's rule that answers corr with the armed
// fault's code, and returns the frame that goes to the broker: the request
// itself for RequestAppliedError, an ApiVersions request of the same
// correlation id for RequestErrorCode (the broker applies nothing, and its
// answer holds the built one's place in the connection's order). A request
// whose answer cannot be built goes on as it is; the hit says why.
func errorCodeFrames(l *link, frame []byte, corr int32, armed *ArmedRequest) []byte {
	code := armed.fault.Code
	req, _, err := kafkacodes.ReadRequest(frame)
	var resp kmsg.Response
	if err == nil {
		resp, err = kafkacodes.ErrorResponse(req, code)
	}
	if err != nil {
		armed.update(func(h *RequestHit) { h.Err = err.Error() })
		return frame
	}
	armed.update(func(h *RequestHit) { h.Code = code })
	l.rule(corr, swallow{drop: 1, replace: kafkacodes.AppendResponse(nil, corr, resp)})
	if armed.fault.Mode == RequestAppliedError {
		return frame
	}
	substitute := kmsg.NewPtrApiVersionsRequest()
	substitute.SetVersion(3)
	substitute.ClientSoftwareName, substitute.ClientSoftwareVersion = "krabka-chaos", "1"
	return substituteClient.AppendRequest(nil, substitute, corr)
}

// hold holds a request frame until its client gave up on the connection
// and resent it elsewhere, or until MaxHold, and then sends it with the
// frames queued behind it. It reports whether the link goes on.
func (p *Proxy) hold(l *link, upstream net.Conn, frame []byte, key int16, corr int32, frames <-chan []byte, armed *ArmedRequest) bool {
	p.mu.Lock()
	sentBefore := p.sent[key]
	p.mu.Unlock()
	queued := [][]byte{frame}
	release := func(clientGone, resent bool) bool {
		armed.update(func(h *RequestHit) {
			h.ReleasedMillis, h.ClientGone, h.Resent = time.Now().UnixMilli(), clientGone, resent
		})
		for _, f := range queued {
			if !l.send(upstream, f) {
				return false
			}
		}
		return true
	}
	deadline := time.NewTimer(armed.fault.MaxHold)
	defer deadline.Stop()
wait:
	for {
		select {
		case f, ok := <-frames:
			if !ok {
				break wait
			}
			queued = append(queued, f)
		case <-deadline.C:
			return release(false, false) // the client kept the connection: a long delay
		case <-l.done:
			return false // cut: the held request is lost with its connection
		}
	}
	// The client gave up on the connection: wait for its resend, then let
	// the held request land late, and wait for its answer before the
	// broker connection closes, so that the broker reads it.
	l.clientDead.Store(true)
	resent := false
	wait := time.Now().Add(resendWait)
	for !resent && time.Now().Before(wait) {
		select {
		case <-l.done:
			return false
		case <-time.After(20 * time.Millisecond):
		}
		p.mu.Lock()
		resent = p.sent[key] > sentBefore
		p.mu.Unlock()
	}
	answered := l.expect(corr)
	if release(true, resent) {
		select {
		case <-answered:
		case <-time.After(lateAnswerWait):
		case <-l.done:
		}
	}
	l.close()
	return false
}

// resetHold resets the client's side of the link at once and holds the
// request frame until resetHoldAfter more requests of key went through the
// proxy, or MaxHold, then sends it to the broker, waits for its answer
// (which goes nowhere) and closes the link.
func (p *Proxy) resetHold(l *link, upstream net.Conn, frame []byte, key int16, corr int32, armed *ArmedRequest) {
	p.mu.Lock()
	sentBefore := p.sent[key]
	p.mu.Unlock()
	l.clientDead.Store(true)
	resetConn(l.client)
	_ = l.client.Close()
	resent := false
	deadline := time.Now().Add(armed.fault.MaxHold)
	for time.Now().Before(deadline) {
		p.mu.Lock()
		passed := p.sent[key] - sentBefore
		p.mu.Unlock()
		resent = passed > 0
		if passed >= resetHoldAfter {
			break
		}
		select {
		case <-l.done:
			return // cut: the held request is lost with its connection
		case <-time.After(20 * time.Millisecond):
		}
	}
	armed.update(func(h *RequestHit) {
		h.ReleasedMillis, h.ClientGone, h.Resent = time.Now().UnixMilli(), true, resent
	})
	answered := l.expect(corr)
	if l.send(upstream, frame) {
		select {
		case <-answered:
		case <-time.After(lateAnswerWait):
		case <-l.done:
		}
	}
	l.close()
}

// send writes a frame to the broker; on an error it closes the link and
// reports false.
func (l *link) send(upstream net.Conn, frame []byte) bool {
	if _, err := upstream.Write(frame); err != nil {
		l.close()
		return false
	}
	return true
}

func (l *link) rule(corr int32, s swallow) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.swallows == nil {
		l.swallows = make(map[int32]*swallow)
	}
	l.swallows[corr] = &s
}

// expect returns a channel that closes when the answer of corr arrives.
func (l *link) expect(corr int32) <-chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waiting == nil {
		l.waiting = make(map[int32]chan struct{})
	}
	ch := make(chan struct{})
	l.waiting[corr] = ch
	return ch
}

// answers pumps the broker's answers back to the client, in order, on the
// connection that asked, applying the swallow rules of the link. A client
// that is gone no longer gets them, but the pump goes on reading, so that
// a request released late is read and answered by the broker.
func (p *Proxy) answers(l *link, upstream net.Conn) {
	r := bufio.NewReaderSize(upstream, 64*1024)
	for {
		frame, err := readFrame(r)
		if err != nil {
			l.close()
			return
		}
		if !p.pass(l) {
			l.close()
			return
		}
		corr, err := responseCorrelation(frame)
		if err != nil {
			l.close()
			return
		}
		drop, reset := false, false
		var replace []byte
		l.mu.Lock()
		if s := l.swallows[corr]; s != nil {
			switch {
			case s.pass > 0:
				s.pass--
			case s.drop > 0:
				s.drop--
				drop, reset, replace = true, s.reset, s.replace
				s.replace = nil
			}
			if s.pass == 0 && s.drop == 0 {
				delete(l.swallows, corr)
			}
		}
		if ch := l.waiting[corr]; ch != nil {
			close(ch)
			delete(l.waiting, corr)
		}
		watch := l.mints[corr]
		l.mu.Unlock()
		if reset {
			l.clientDead.Store(true)
			resetConn(l.client)
			_ = l.client.Close()
		}
		if watch != nil {
			watch.noteMint(frame, !drop && replace == nil && !l.clientDead.Load())
		}
		if replace != nil && !l.clientDead.Load() {
			frame, drop = replace, false
		}
		if drop || l.clientDead.Load() {
			continue
		}
		if _, err := l.client.Write(frame); err != nil {
			l.clientDead.Store(true)
		}
	}
}

// RequestFaultStats counts the request faults of one API key in a run:
// how many were armed for it, how many took a request (by mode), and how
// many held requests reached the broker after their client had given up
// on the connection (applied late).
type RequestFaultStats struct {
	Key    int16          `json:"key"`
	API    string         `json:"api"`
	Armed  int            `json:"armed"`
	Fired  int            `json:"fired"`
	ByMode map[string]int `json:"by_mode"`
	Late   int            `json:"applied_late"`
	// Codes counts the error codes that answered a request of the key
	// (error-code and applied-error), by kerr's name of the code.
	Codes map[string]int `json:"codes,omitempty"`
}

// countRequestFaults sums up the request faults of a nemesis log by API
// key, in key order.
func countRequestFaults(faults []Fault) []RequestFaultStats {
	byKey := make(map[int16]*RequestFaultStats)
	get := func(key int16) *RequestFaultStats {
		if byKey[key] == nil {
			byKey[key] = &RequestFaultStats{Key: key, API: APIName(key), ByMode: make(map[string]int)}
		}
		return byKey[key]
	}
	for _, f := range faults {
		if f.Kind != FaultRequest {
			continue
		}
		for _, key := range f.Keys {
			get(key).Armed++
		}
		if f.Hit == nil {
			continue
		}
		st := get(f.Hit.Key)
		st.Fired++
		st.ByMode[string(f.Request)]++
		if f.Hit.ClientGone {
			st.Late++
		}
		if f.Hit.Code != 0 {
			if st.Codes == nil {
				st.Codes = make(map[string]int)
			}
			st.Codes[kerr.ErrorForCode(f.Hit.Code).Error()]++
		}
	}
	out := make([]RequestFaultStats, 0, len(byKey))
	for _, st := range byKey {
		out = append(out, *st)
	}
	slices.SortFunc(out, func(a, b RequestFaultStats) int { return int(a.Key) - int(b.Key) })
	return out
}
