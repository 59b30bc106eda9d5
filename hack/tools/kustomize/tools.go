//go:build tools

// Package tools pins the kustomize CLI's module.
package tools

import _ "sigs.k8s.io/kustomize/kustomize/v5"
