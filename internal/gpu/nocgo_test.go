//go:build !cgo

package gpu

import (
	"errors"
	"testing"
)

func TestOpenWithoutCgo(t *testing.T) {
	_, err := Open()
	if !errors.Is(err, ErrUnavailable) || err.Error() != "built without cgo: NVML unavailable" {
		t.Fatalf("Open() = %v, want built without cgo: NVML unavailable", err)
	}
}
