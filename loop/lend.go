package loop

import (
	"math/bits"
	"sync"

	"github.com/theloop-dev/theloop/graph"
)

// Lending artifact bytes (graph.Lender). A check reads every artifact of a
// work item into memory; `check --all` reads megabytes per run. Lent
// buffers go back to a pool when the check's report is complete, so the
// next work item reads into memory already faulted in instead of a fresh
// allocation the garbage collector must reclaim.

// Buffers are pooled by power-of-two capacity from 1 KiB to 1 MiB; a file
// larger than that is lent a buffer of its own that is not kept.
const (
	minLendShift = 10
	maxLendShift = 20
)

var lendPools [maxLendShift - minLendShift + 1]sync.Pool

// lendBuffer returns a slice of length 0 and capacity at least n.
func lendBuffer(n int) []byte {
	shift := max(bits.Len(uint(n-1)), minLendShift)
	if n <= 0 || shift > maxLendShift {
		return make([]byte, 0, n)
	}
	if b, ok := lendPools[shift-minLendShift].Get().(*[]byte); ok {
		return (*b)[:0]
	}
	return make([]byte, 0, 1<<shift)
}

// returnBuffer clears b and pools it by its capacity. Clearing turns a
// string that wrongly still shares the bytes into NULs that every test
// sees, instead of text of another work item that would slip through. A
// read writes only what becomes the slice's length, so clearing that
// much leaves a pooled buffer all zeros.
func returnBuffer(b []byte) {
	shift := bits.Len(uint(cap(b))) - 1
	if shift < minLendShift || shift > maxLendShift {
		return
	}
	clear(b)
	b = b[:0]
	lendPools[shift-minLendShift].Put(&b)
}

// Lend implements graph.Lender: ReadFile into a pooled buffer.
func (a *FileArtifacts) Lend(name string) ([]byte, error) {
	if data, ok := a.take(name); ok {
		return data, nil
	}
	rel, err := a.rel("read", name)
	if err != nil {
		return nil, err
	}
	data, err := readBeneathInto(a.bn, rel, MaxArtifactBytes, lendBuffer)
	if err != nil {
		return nil, readError(name, err)
	}
	return data, nil
}

// GiveBack implements graph.Lender. Any buffer may come back — one grown
// past its pooled size, or read whole elsewhere — as the pool goes by
// capacity.
func (a *FileArtifacts) GiveBack(data []byte) { returnBuffer(data) }

var _ graph.Lender = (*FileArtifacts)(nil)
