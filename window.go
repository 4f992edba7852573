package crashloop

import "github.com/crashloopguard/crashloop/internal/rolling"

// window is the rolling window of event times every guard counts (see
// rolling.Window).
type window = rolling.Window
