package redisstore

import (
	"sync"

	"github.com/crashloopguard/crashloop"
	"github.com/crashloopguard/crashloop/share"
)

// layers maps each Supervisor made by newShared to its Layer.
var layers sync.Map

// newShared returns a Supervisor that shares its state through l, as a
// program does with crashloop.WithSharing(share.New(l)).
func newShared(cfg crashloop.SupervisorConfig, l share.Ledger, opts ...crashloop.Option) (*crashloop.Supervisor, error) {
	layer := share.New(l)
	s, err := crashloop.NewSupervisor(cfg, append(opts, crashloop.WithSharing(layer))...)
	if err == nil {
		layers.Store(s, layer)
	}
	return s, err
}

// layerOf returns the Layer of a Supervisor made by newShared.
func layerOf(s *crashloop.Supervisor) *share.Layer {
	l, _ := layers.Load(s)
	y, _ := l.(*share.Layer)
	return y
}
