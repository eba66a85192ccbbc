package ingress

import (
	"errors"
	"hash"
	"io"
	"net/http"
	"strings"
	"sync"
)

// Reading a body nobody has authenticated yet.
//
// A webhook's signature covers the whole body, so the body must be read
// before it can be believed. What the receiver holds while it reads is
// therefore at the mercy of whoever reaches the port: a hundred connections
// each declaring 25 MB and sending all but the last byte once made loopd
// allocate 2.5 GB, answered 401 each in the end; later, 600 connections
// that each sent 1 KB and then a byte every two seconds shut every signed
// delivery out, because each took a whole 64 KiB of the budget before it had
// sent a byte. The rules below keep both bounded:
//
//   - nothing is allocated by the declared Content-Length, and nothing
//     before the first byte of the body has arrived: the body is read into
//     chunks that grow with what was read (512 bytes, then doubling up to
//     64 KiB), each taken only once a byte for it is in hand, so a request
//     holds at most twice what it has sent (and one chunk past 64 KiB);
//     the HMAC is computed as the bytes arrive;
//   - every chunk is charged to one budget shared by all requests
//     (Config.MaxUnverifiedBytes), and to the remote address that sent it.
//     An address may grow only within its fair share of the budget (the
//     shared part divided among the addresses holding any), and a reserve
//     is kept for addresses that hold little: a signed delivery from an
//     address holding nothing always finds room, however many connections
//     another address keeps open. A request that cannot get a chunk is
//     answered 503 with Retry-After at once, and its connection closed;
//   - a request whose signature header cannot be right (missing or
//     malformed) is answered 401 before a byte of the body is read;
//   - only once the signature matches is the body copied into one slice for
//     the router; the chunks go back to their pools, which keep no more
//     than the budget, and the garbage collector returns the rest.
//
// Behind a reverse proxy every request comes from the proxy's address: the
// share then applies to the proxy as a whole (as the connection limits do).

// bodyChunk is the largest chunk a body is read, pooled and charged in.
const bodyChunk = 64 << 10

// Chunk sizes: minChunk << class, for class in [0, chunkClasses).
const (
	minChunk     = 512
	chunkClasses = 8 // 512 B … 64 KiB
)

// errBusy means the unverified-bytes budget (or the sender's share of it)
// is spent.
var errBusy = errors.New("unverified body budget spent")

// bodyBudget is a non-blocking weighted semaphore over the bytes of
// unauthenticated bodies held across all requests, with a share per remote
// address. Blocking would let slow senders queue up goroutines behind each
// other; refusing at once keeps a flood cheap to answer.
//
// The budget is limit bytes. Of it, reserve is kept for quiet addresses:
// an address may take from the shared part (limit - reserve) while it
// holds no more than that part divided by the addresses holding any (its
// fair share), and from anywhere in the budget while it holds no more than
// quiet. An address holding everything it could take therefore leaves the
// reserve to the others; it must send more to hold more, and every chunk
// past its share is refused.
type bodyBudget struct {
	limit, reserve, quiet int64

	mu     sync.Mutex
	used   int64
	peak   int64            // high-water mark, for tests and benchmarks
	byAddr map[string]int64 // bytes held per remote address (no zero entries)
}

// newBodyBudget returns the budget for limit bytes, of which bodies of up to
// maxBody must be able to fit for one address alone.
func newBodyBudget(limit, maxBody int64) *bodyBudget {
	reserve := min(limit/4, limit-maxBody-bodyChunk)
	reserve = max(reserve, 0)
	return &bodyBudget{limit: limit, reserve: reserve, quiet: reserve / 2, byAddr: map[string]int64{}}
}

// take charges n bytes to addr, or reports false and charges nothing.
func (b *bodyBudget) take(addr string, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	held := b.byAddr[addr]
	holders := int64(len(b.byAddr))
	if held == 0 {
		holders++
	}
	shared := b.limit - b.reserve
	fair := b.used+n <= shared && held+n <= shared/holders
	quiet := b.used+n <= b.limit && held+n <= b.quiet
	if !fair && !quiet {
		return false
	}
	b.used += n
	b.byAddr[addr] = held + n
	b.peak = max(b.peak, b.used)
	return true
}

// give returns n bytes charged to addr.
func (b *bodyBudget) give(addr string, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if left := b.byAddr[addr] - n; left > 0 {
		b.byAddr[addr] = left
	} else {
		delete(b.byAddr, addr)
	}
}

// inUse and highWater report the bytes held now and at most so far.
func (b *bodyBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

func (b *bodyBudget) highWater() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.peak
}

// heldBy reports the bytes addr holds.
func (b *bodyBudget) heldBy(addr string) int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.byAddr[addr]
}

// chunkPools pools the chunks by size class; each holds *[]byte of its
// class's size, so that putting one back allocates nothing.
type chunkPools [chunkClasses]sync.Pool

func (p *chunkPools) get(class int) *[]byte {
	if c, ok := p[class].Get().(*[]byte); ok {
		return c
	}
	c := make([]byte, minChunk<<class)
	return &c
}

func (p *chunkPools) put(c *[]byte) { p[chunkClass(len(*c))].Put(c) }

// chunkClass is the class of a chunk of size n (a power of two).
func chunkClass(n int) int {
	class := 0
	for minChunk<<class < n {
		class++
	}
	return class
}

// chunkedBody is a body read into pooled chunks, each full but the last,
// n bytes in all, charged to addr. The first chunks live in the value
// itself, so an ordinary body costs no slice of its own.
type chunkedBody struct {
	first [10]*[]byte // 512 B … 64 KiB, 64 KiB: the first 192 KiB
	more  []*[]byte
	count int
	n     int64
	held  int64 // bytes charged: the chunks' sizes
	addr  string
	probe [1]byte
}

func (cb *chunkedBody) chunk(i int) *[]byte {
	if i < len(cb.first) {
		return cb.first[i]
	}
	return cb.more[i-len(cb.first)]
}

func (cb *chunkedBody) add(c *[]byte) {
	if cb.count < len(cb.first) {
		cb.first[cb.count] = c
	} else {
		cb.more = append(cb.more, c)
	}
	cb.count++
}

// remoteHost is the address part of an http.Request's RemoteAddr.
func remoteHost(remote string) string {
	if i := strings.LastIndexByte(remote, ':'); i > 0 && !strings.HasSuffix(remote, "]") {
		return remote[:i]
	}
	return remote
}

// readChunked reads body (at most limit bytes; exactly length when length
// is not -1) from cb.addr into chunks charged to the budget, writing every
// byte to mac when mac is not nil. On error the chunks read so far are
// released. errTooLarge: more than limit bytes; errBusy: the budget (or the
// address's share) is spent; anything else: the client went away or timed
// out.
func (r *Receiver) readChunked(cb *chunkedBody, body io.Reader, length, limit int64, mac hash.Hash) error {
	if body == nil || body == http.NoBody {
		return nil
	}
	for {
		// A chunk is taken only once a byte for it has arrived: a sender
		// that stalls holds what it sent, never what it declared.
		n, err := readSome(body, cb.probe[:])
		if n == 0 {
			return r.finish(cb, length, err)
		}
		// Doubling: 512, 512, 1 KiB, 2 KiB, … 64 KiB, 64 KiB, …
		size := min(max(cb.held, minChunk), bodyChunk)
		if !r.budget.take(cb.addr, size) {
			r.release(cb)
			return errBusy
		}
		cp := r.chunks.get(chunkClass(int(size)))
		cb.add(cp)
		cb.held += size
		c := *cp
		c[0] = cb.probe[0]
		k, err := io.ReadFull(body, c[1:])
		k++
		if mac != nil {
			mac.Write(c[:k])
		}
		cb.n += int64(k)
		if cb.n > limit {
			r.release(cb)
			return errTooLarge
		}
		switch err {
		case nil:
			continue
		case io.EOF, io.ErrUnexpectedEOF:
			return r.finish(cb, length, io.EOF)
		default:
			r.release(cb)
			return err
		}
	}
}

// readSome reads at least one byte into p unless the body ends or fails.
func readSome(body io.Reader, p []byte) (int, error) {
	for {
		n, err := body.Read(p)
		if n > 0 || err != nil {
			return n, err
		}
	}
}

// finish ends a read that stopped with err: the end of the body (io.EOF,
// or a short read, which io.ReadFull and net/http both report as
// io.ErrUnexpectedEOF — the count against length tells them apart), or a
// failure.
func (r *Receiver) finish(cb *chunkedBody, length int64, err error) error {
	if err != io.EOF && err != io.ErrUnexpectedEOF {
		r.release(cb)
		return err
	}
	if length >= 0 && cb.n != length {
		r.release(cb)
		return io.ErrUnexpectedEOF
	}
	return nil
}

// copyTo copies the body into buf (grown when too small) and returns it.
func (cb *chunkedBody) copyTo(buf []byte) []byte {
	if int64(cap(buf)) >= cb.n {
		buf = buf[:cb.n]
	} else {
		buf = make([]byte, cb.n)
	}
	off := 0
	for i := range cb.count {
		off += copy(buf[off:], *cb.chunk(i))
	}
	return buf
}

// release returns the chunks to their pools and their bytes to the budget.
func (r *Receiver) release(cb *chunkedBody) {
	for i := range cb.count {
		r.chunks.put(cb.chunk(i))
	}
	r.budget.give(cb.addr, cb.held)
	cb.first, cb.more, cb.count, cb.n, cb.held = [10]*[]byte{}, nil, 0, 0, 0
}
