package scenario

import (
	"fmt"
	"time"
)

// ms says a duration in whole milliseconds, or seconds from 10 s on.
func ms(d time.Duration) string {
	if d >= 10*time.Second {
		return fmt.Sprintf("%.1f s", d.Seconds())
	}
	return fmt.Sprintf("%d ms", d.Milliseconds())
}

// onOff says a flag.
func onOff(b bool) string {
	if b {
		return "on"
	}
	return "off"
}

// fencing is the fencing= parameter of a purchase.
func fencing(on bool) *bool { return &on }
