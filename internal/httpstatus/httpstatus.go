// Package httpstatus records the status an http.Handler answers with, for
// logs, metrics and request records.
package httpstatus

import "net/http"

// Writer is an http.ResponseWriter that remembers the first status
// written: the code given to WriteHeader, or 200 when the body is written
// first. Status is 0 while nothing has been written.
type Writer struct {
	http.ResponseWriter
	Status int
}

// WriteHeader records code (the first time) and passes it on.
func (w *Writer) WriteHeader(code int) {
	if w.Status == 0 {
		w.Status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Write records 200 when no status was written before, and passes b on.
func (w *Writer) Write(b []byte) (int, error) {
	if w.Status == 0 {
		w.Status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Flush flushes the underlying writer when it can (server-sent events).
func (w *Writer) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}
