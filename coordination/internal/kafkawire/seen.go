package kafkawire

import "hash/maphash"

// This file holds the groups that a followed partition's log holds: a
// Bloom filter of the key group of every record that the fetch loop
// folded, kept or not. A group that joins the view's selection and is
// certainly not in it has no record below the view's position, so it
// needs no walk of the log (backfill.go): the common case of a role that
// a process starts to follow before it ever wrote, such as each of many
// roles that one process acquires on a partition it follows already.

const (
	seenBits   = 1 << 17 // 16 KiB a followed partition, allocated at its first group
	seenHashes = 4       // about 0.5 % false positives at 10 000 groups a partition
)

// seenSeed seeds the hashes of every filter of the process.
var seenSeed = maphash.MakeSeed()

// seenGroups is a Bloom filter of key groups: mayHold is false only for a
// group that add never saw. A false positive costs a walk of the log that
// finds nothing. The zero value is empty. It is guarded by the reader's
// mu.
type seenGroups struct {
	bits []uint64
}

// add records group g.
func (f *seenGroups) add(g []byte) {
	if f.bits == nil {
		f.bits = make([]uint64, seenBits/64)
	}
	h1, h2 := seenHash(g)
	for i := range uint32(seenHashes) {
		b := (h1 + i*h2) % seenBits
		f.bits[b/64] |= 1 << (b % 64)
	}
}

// mayHold reports whether add may have seen group g.
func (f *seenGroups) mayHold(g string) bool {
	if f.bits == nil {
		return false
	}
	h1, h2 := seenHash([]byte(g))
	for i := range uint32(seenHashes) {
		b := (h1 + i*h2) % seenBits
		if f.bits[b/64]&(1<<(b%64)) == 0 {
			return false
		}
	}
	return true
}

// reset forgets every group.
func (f *seenGroups) reset() { clear(f.bits) }

// seenHash returns the two hashes of the double hashing of g (Kirsch and
// Mitzenmacher); the second is odd, so the probes of one group differ.
func seenHash(g []byte) (uint32, uint32) {
	h := maphash.Bytes(seenSeed, g)
	return uint32(h), uint32(h>>32) | 1 //nolint:gosec // the two halves of the 64-bit hash, cut on purpose
}
