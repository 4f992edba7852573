module github.com/crashloopguard/crashloop/bench

go 1.26

require (
	github.com/crashloopguard/crashloop v0.0.0-00010101000000-000000000000
	golang.org/x/time v0.16.0
)

