module github.com/crashloopguard/crashloop/examples

go 1.26

require (
	github.com/crashloopguard/crashloop v0.0.0-00010101000000-000000000000
	github.com/thejerf/suture/v4 v4.0.6
)
