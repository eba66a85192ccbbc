package httpstatus

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestWriterRecordsTheFirstStatus(t *testing.T) {
	tests := []struct {
		name  string
		write func(w http.ResponseWriter)
		want  int
	}{
		{"nothing written", func(http.ResponseWriter) {}, 0},
		{"body first is 200", func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")) }, http.StatusOK},
		{"header then body", func(w http.ResponseWriter) { w.WriteHeader(http.StatusTeapot); _, _ = w.Write([]byte("x")) }, http.StatusTeapot},
		{"the first header wins", func(w http.ResponseWriter) { w.WriteHeader(http.StatusNotFound); w.WriteHeader(http.StatusOK) }, http.StatusNotFound},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			w := &Writer{ResponseWriter: rec}
			tc.write(w)
			require.Equal(t, tc.want, w.Status)
			w.Flush()
			require.True(t, rec.Flushed, "Flush reaches the underlying writer")
		})
	}
}
