package twin

import (
	"unsafe"

	"github.com/fleetdrill/fleetdrill/twin/sched"
)

// unsafePointer converts a core request back to the twin request that embeds
// it as its first field, so the core needs no side table from its requests
// to the driver's.
func unsafePointer(cr *sched.Request) unsafe.Pointer { return unsafe.Pointer(cr) }
