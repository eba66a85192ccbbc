package ingress

import (
	"errors"
	"hash"
	"io"
	"net/http"
	"sync/atomic"
)

// Reading a body nobody has authenticated yet.
//
// A webhook's signature covers the whole body, so the body must be read
// before it can be believed. What the receiver holds while it reads is
// therefore at the mercy of whoever reaches the port: a hundred connections
// each declaring 25 MB and sending all but the last byte once made loopd
// allocate 2.5 GB, answered 401 each in the end. The rules below keep that
// bounded:
//
//   - nothing is allocated by the declared Content-Length; the body is read
//     in fixed chunks taken from a pool, the HMAC computed as they arrive;
//   - every chunk is charged to one budget shared by all requests
//     (Config.MaxUnverifiedBytes); a request that cannot get a chunk is
//     answered 503 with Retry-After at once, and its connection closed;
//   - a request whose signature header cannot be right (missing or
//     malformed) is answered 401 before a byte of the body is read;
//   - only once the signature matches is the body copied into one slice for
//     the router; the chunks go back to the pool, which keeps no more than
//     the budget, and the garbage collector returns the rest.

// bodyChunk is the unit a body is read, pooled and charged in.
const bodyChunk = 64 << 10

// errBusy means the unverified-bytes budget is spent.
var errBusy = errors.New("unverified body budget spent")

// bodyBudget is a non-blocking weighted semaphore over the bytes of
// unauthenticated bodies held across all requests. Blocking would let slow
// senders queue up goroutines behind each other; refusing at once keeps a
// flood cheap to answer.
type bodyBudget struct {
	limit int64
	used  atomic.Int64
	peak  atomic.Int64 // high-water mark, for tests and benchmarks
}

// take charges n bytes, or reports false and charges nothing.
func (b *bodyBudget) take(n int64) bool {
	if v := b.used.Add(n); v > b.limit {
		b.used.Add(-n)
		return false
	} else {
		for p := b.peak.Load(); v > p && !b.peak.CompareAndSwap(p, v); p = b.peak.Load() {
		}
	}
	return true
}

func (b *bodyBudget) give(n int64) { b.used.Add(-n) }

// chunkedBody is a body read into pooled chunks: chunks[i] is full except
// the last, which holds n - i*bodyChunk bytes.
type chunkedBody struct {
	chunks []*[bodyChunk]byte
	n      int64
}

// readChunked reads body (at most max bytes; exactly length when length
// is not -1) into chunks charged to budget, writing
// every byte to mac when mac is not nil. On error the chunks read so far
// are released. errTooLarge: more than max bytes; errBusy: the budget is
// spent; anything else: the client went away or timed out.
func (r *Receiver) readChunked(body io.Reader, length, max int64, mac hash.Hash) (chunkedBody, error) {
	var cb chunkedBody
	if body == nil || body == http.NoBody {
		return cb, nil
	}
	for {
		if !r.budget.take(bodyChunk) {
			r.release(&cb)
			return chunkedBody{}, errBusy
		}
		c := r.chunks.Get().(*[bodyChunk]byte)
		cb.chunks = append(cb.chunks, c)
		n, err := io.ReadFull(body, c[:])
		if mac != nil {
			mac.Write(c[:n])
		}
		cb.n += int64(n)
		if cb.n > max {
			r.release(&cb)
			return chunkedBody{}, errTooLarge
		}
		switch err {
		case nil:
			continue
		case io.EOF, io.ErrUnexpectedEOF:
			// io.ReadFull reports a short last chunk as ErrUnexpectedEOF,
			// and so does net/http for a body cut short of its
			// Content-Length: the count tells them apart.
			if length >= 0 && cb.n != length {
				r.release(&cb)
				return chunkedBody{}, io.ErrUnexpectedEOF
			}
			if n == 0 {
				// The chunk taken for nothing goes back now.
				cb.chunks = cb.chunks[:len(cb.chunks)-1]
				r.chunks.Put(c)
				r.budget.give(bodyChunk)
			}
			return cb, nil
		default:
			r.release(&cb)
			return chunkedBody{}, err
		}
	}
}

// copyTo copies the body into buf (grown when too small) and returns it.
func (cb *chunkedBody) copyTo(buf []byte) []byte {
	if int64(cap(buf)) >= cb.n {
		buf = buf[:cb.n]
	} else {
		buf = make([]byte, cb.n)
	}
	off := 0
	for _, c := range cb.chunks {
		off += copy(buf[off:], c[:])
	}
	return buf
}

// release returns the chunks to the pool and their bytes to the budget.
func (r *Receiver) release(cb *chunkedBody) {
	for _, c := range cb.chunks {
		r.chunks.Put(c)
	}
	r.budget.give(int64(len(cb.chunks)) * bodyChunk)
	cb.chunks, cb.n = nil, 0
}
