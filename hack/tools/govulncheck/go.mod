// Pins govulncheck, which checks gantry's dependencies against the Go
// vulnerability database. Build with `make vuln`.
module github.com/gantry-dev/gantry/hack/tools/govulncheck

go 1.26.0

require golang.org/x/vuln v1.9.0

require (
	golang.org/x/mod v0.42.0 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/telemetry v0.0.0-20261010193011-f71dc92da45e // indirect
	golang.org/x/tools v0.52.0 // indirect
)
