//go:build !race

package faultrun

const raceEnabled = false
