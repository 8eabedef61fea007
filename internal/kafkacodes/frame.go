package kafkacodes

import (
	"fmt"

	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// ReadRequest decodes one request frame as a client writes it (a 4-byte
// size, the request header: API key, version, correlation id, client id,
// the header's tagged fields when the version is flexible; then the body).
// It returns the request and its correlation id; a frame it cannot read
// (too short, a key kmsg does not know, a body that does not decode) is an
// error.
func ReadRequest(frame []byte) (kmsg.Request, int32, error) {
	if len(frame) < 12 {
		return nil, 0, fmt.Errorf("kafkacodes: a request frame of %d bytes has no header", len(frame))
	}
	b := kbin.Reader{Src: frame[4:]}
	key, version, corr := b.Int16(), b.Int16(), b.Int32()
	req := kmsg.RequestForKey(key)
	if req == nil {
		return nil, corr, fmt.Errorf("kafkacodes: a request of unknown API key %d", key)
	}
	req.SetVersion(version)
	b.NullableString() // the client id
	if req.IsFlexible() {
		for n := b.Uvarint(); n > 0; n-- { // the header's tagged fields
			b.Uvarint()
			b.Span(int(b.Uvarint()))
		}
	}
	if err := b.Complete(); err != nil {
		return nil, corr, fmt.Errorf("kafkacodes: the header of a %s request: %w", kmsg.NameForKey(key), err)
	}
	if err := req.ReadFrom(b.Src); err != nil {
		return nil, corr, fmt.Errorf("kafkacodes: the body of a %s v%d request: %w", kmsg.NameForKey(key), version, err)
	}
	return req, corr, nil
}

// AppendResponse appends the frame of resp as a broker writes it: a 4-byte
// size, the correlation id, the header's empty tagged fields when the
// version is flexible (never for ApiVersions, whose answer header is
// always version 0), then the body.
func AppendResponse(dst []byte, corr int32, resp kmsg.Response) []byte {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	dst = kbin.AppendInt32(dst, corr)
	if resp.IsFlexible() && resp.Key() != kmsg.ApiVersions.Int16() {
		dst = append(dst, 0)
	}
	dst = resp.AppendTo(dst)
	kbin.AppendInt32(dst[start:start], int32(len(dst)-start-4)) //nolint:gosec // a frame the caller built, far below 2 GiB
	return dst
}
