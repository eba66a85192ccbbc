package daemon

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// The armed-without-a-session rows are bounded: past maxArmedRows the one
// reported longest ago is forgotten, so unstarted tickets cannot grow the
// daemon without end.
func TestArmedRowsAreBounded(t *testing.T) {
	s := &dashSource{armed: map[string]armedEntry{}}
	t0 := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	drop := func(n int) Observation {
		return Observation{Name: "dispatch.dropped", WorkItem: fmt.Sprintf("github:o/r#%d", n), Time: t0.Add(time.Duration(n) * time.Second),
			Fields: map[string]any{"reason": "awaiting-start"}}
	}
	for n := 1; n <= maxArmedRows; n++ {
		s.noteIntake(drop(n))
	}
	require.Len(t, s.armed, maxArmedRows)
	s.noteIntake(drop(maxArmedRows + 1))
	require.Len(t, s.armed, maxArmedRows)
	require.NotContains(t, s.armed, "github:o/r#1", "the oldest report is forgotten")
	require.Contains(t, s.armed, fmt.Sprintf("github:o/r#%d", maxArmedRows+1))
	s.noteIntake(drop(2)) // a known item is updated in place, nothing evicted
	require.Len(t, s.armed, maxArmedRows)
	require.Contains(t, s.armed, "github:o/r#3")
}
