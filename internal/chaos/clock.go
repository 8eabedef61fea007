package chaos

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/krabka-io/krabka-streams-go/coordination"
)

// SkewClock is a [coordination.Clock] that reads the host clock plus an
// offset, which the nemesis changes while the member runs. A wait is an
// extent, so an offset moves the instants the member reads and writes
// (lease grants and deadlines, the challenge instants), never the length of
// a wait. It is safe for concurrent use.
type SkewClock struct {
	offset atomic.Int64 // milliseconds
}

var _ coordination.Clock = (*SkewClock)(nil)

// NowMillis returns the host time plus the offset, in milliseconds since the
// Unix epoch.
func (c *SkewClock) NowMillis() int64 { return time.Now().UnixMilli() + c.offset.Load() }

// After returns a channel that receives once the extent passes on the host
// clock. An extent at or below zero receives at once.
func (c *SkewClock) After(extent time.Duration) <-chan time.Time {
	return coordination.SystemClock{}.After(extent)
}

// Offset returns the offset, in milliseconds.
func (c *SkewClock) Offset() int64 { return c.offset.Load() }

// SetOffset sets the offset, in milliseconds.
func (c *SkewClock) SetOffset(millis int64) { c.offset.Store(millis) }

// Follow reads the offset from the control file every interval until ctx
// ends. A missing or malformed file leaves the offset as it is. The caller
// runs it on a goroutine of its own and owns that goroutine through ctx.
func (c *SkewClock) Follow(ctx context.Context, path string, interval time.Duration) {
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		if millis, err := ReadClockFile(path); err == nil {
			c.SetOffset(millis)
		}
		select {
		case <-ctx.Done():
			return
		case <-ticker.C:
		}
	}
}

// WriteClockFile sets the offset that a member reads from its control file,
// in milliseconds. It writes a temporary file and renames it, so a reader
// never sees half a number.
func WriteClockFile(path string, millis int64) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	if _, err := tmp.WriteString(strconv.FormatInt(millis, 10) + "\n"); err != nil {
		tmp.Close()
		os.Remove(tmp.Name())
		return err
	}
	if err := tmp.Close(); err != nil {
		os.Remove(tmp.Name())
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// ReadClockFile reads the offset of a control file, in milliseconds.
func ReadClockFile(path string) (int64, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	text := strings.TrimSpace(string(data))
	if text == "" {
		return 0, errors.New("empty clock file")
	}
	return strconv.ParseInt(text, 10, 64)
}
