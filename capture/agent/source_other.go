//go:build !linux

package agent

import (
	"context"
	"errors"
)

func (a *Agent) openLive() (func(ctx context.Context) error, error) {
	return nil, errors.New("live capture needs Linux (AF_PACKET); use replay")
}
