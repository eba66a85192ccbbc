package graph

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// timestamp writes its digits by hand; it must say what the layout says,
// across the years Format writes as four digits and beyond them.
func TestTimestampMatchesTheLayout(t *testing.T) {
	zones := []*time.Location{time.UTC, time.FixedZone("east", 5*3600+1800), time.FixedZone("west", -11*3600)}
	instants := []time.Time{
		time.Date(2026, 12, 1, 23, 59, 59, 999_999_999, time.UTC),
		time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(9999, 12, 31, 23, 59, 59, 0, time.UTC),
		time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(-1, 6, 15, 12, 30, 45, 0, time.UTC),
		time.Date(1970, 1, 1, 0, 0, 0, 0, time.UTC),
		time.Date(2000, 2, 29, 9, 5, 7, 0, time.UTC),
		{},
	}
	// And a sweep of instants from 1900 to 2200, seconds apart by a prime.
	for sec := int64(-2208988800); sec < 7258118400; sec += 9_999_991 {
		instants = append(instants, time.Unix(sec, 0))
	}
	for _, at := range instants {
		for _, z := range zones {
			in := at.In(z)
			want := in.UTC().Format("2006-01-02T15:04:05") + "+00:00"
			require.Equal(t, want, timestamp(in), "timestamp of %v", in)
		}
	}
}
