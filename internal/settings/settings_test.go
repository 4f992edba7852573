package settings

import (
	"math"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

func TestFormatDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0:                            "0s",
		500 * time.Millisecond:       "500ms",
		time.Second:                  "1s",
		60 * time.Second:             "60s",
		90 * time.Second:             "90s",
		9 * time.Minute:              "540s",
		10 * time.Minute:             "10m",
		20 * time.Minute:             "20m",
		time.Hour:                    "1h",
		2 * time.Hour:                "2h",
		1500 * time.Millisecond:      "1.5s",
		time.Nanosecond:              "1ns",
		-time.Second:                 "-1s",
		time.Duration(math.MaxInt64): time.Duration(math.MaxInt64).String(),
	} {
		assert.Equal(t, want, FormatDuration(d), "%d", int64(d))
	}
}
