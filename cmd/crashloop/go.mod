module github.com/crashloopguard/crashloop/cmd/crashloop

go 1.26

require github.com/crashloopguard/crashloop v0.0.0-00010101000000-000000000000
