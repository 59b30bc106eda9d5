//go:build tools

// Package tools pins the helm CLI's module.
package tools

import _ "helm.sh/helm/v4/cmd/helm"
