package kernel

import (
	"math/bits"
	"sync/atomic"
)

// auditOutage thins the log of an audit store that keeps failing (a full disk refuses
// every call at the rate calls arrive): the 1st, 2nd, 4th, 8th… consecutive failure is
// logged with its count, and the first success after an outage says how long it was.
type auditOutage struct{ failures atomic.Int64 }

// failed counts one failure and reports whether to log it, with the running count.
func (o *auditOutage) failed() (n int64, log bool) {
	n = o.failures.Add(1)
	return n, bits.OnesCount64(uint64(n)) == 1
}

// succeeded ends an outage; it returns the number of failures it had (0 when none),
// reading before writing so the common case touches no shared cache line for writing.
func (o *auditOutage) succeeded() int64 {
	if o.failures.Load() == 0 {
		return 0
	}
	return o.failures.Swap(0)
}
