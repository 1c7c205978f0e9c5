//go:build tools

// Package tools pins the main package scripts/helm-build.sh builds from this module (helm's own
// cmd/helm), so that go mod tidy keeps its dependencies.
package tools

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
