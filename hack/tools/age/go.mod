// Pins the age CLI that tests use to prove gantry's encrypted artifacts
// decrypt with the reference implementation. Build with `make tools`.
module github.com/gantry-dev/gantry/hack/tools/age

go 1.26.0

require (
	filippo.io/age v1.3.1 // indirect
	filippo.io/edwards25519 v1.1.0 // indirect
	filippo.io/hpke v0.4.0 // indirect
	filippo.io/nistec v0.0.4 // indirect
	golang.org/x/crypto v0.45.0 // indirect
	golang.org/x/sys v0.38.0 // indirect
	golang.org/x/term v0.37.0 // indirect
)

tool (
	filippo.io/age/cmd/age
	filippo.io/age/cmd/age-keygen
)
