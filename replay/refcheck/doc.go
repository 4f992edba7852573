// Package refcheck holds simulate's reference policies (package replay)
// to the real code of the systems they model, where that code is a Go
// module: client-go's flowcontrol.Backoff, set up as kubelet sets it up,
// and moby's restartmanager. It is a module of its own so that the
// library stays standard-library only; it has tests and no API.
package refcheck
