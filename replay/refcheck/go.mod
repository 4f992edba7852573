module github.com/crashloopguard/crashloop/replay/refcheck

go 1.26.0

require (
	github.com/crashloopguard/crashloop v0.0.0-00010101000000-000000000000
	github.com/docker/docker v28.5.2+incompatible
	github.com/stretchr/testify v1.12.1
	k8s.io/client-go v0.37.2
	k8s.io/utils v0.0.0-20260626114624-be93311217bd
)

require (
	github.com/docker/go-connections v0.8.2 // indirect
	github.com/docker/go-units v0.5.0 // indirect
	github.com/moby/docker-image-spec v1.3.1 // indirect
	github.com/opencontainers/go-digest v1.0.0 // indirect
	github.com/opencontainers/image-spec v1.1.1 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/time v0.15.0 // indirect
	gotest.tools/v3 v3.5.2 // indirect
)
