// Package broker embeds the CustomResourceDefinitions of the broker's
// Kubernetes store (server/store/kube): Reservation, Instruction,
// Advertisement and Consumer in the group broker.federation-autoscaler.io.
// They are hand-written YAML (the records are server/store's types, kept
// whole in spec) and installed by the operator (kubectl apply -f this
// folder, or deploy/manifests/central-ha) or by Install in tests: the
// broker itself needs no right on customresourcedefinitions.
package broker

import (
	"context"
	"embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	"github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
)

// Group and Version of the broker's kinds.
const (
	Group   = "broker.federation-autoscaler.io"
	Version = "v1alpha1"
)

//go:embed *.yaml
var manifests embed.FS

// All returns the embedded CRDs, sorted by name; fresh copies per call.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return crds.Decode(manifests)
}

// Install creates or updates the embedded CRDs and waits until the API
// server serves them (crds.Apply).
func Install(ctx context.Context, cfg *rest.Config) error {
	defs, err := All()
	if err != nil {
		return err
	}
	return crds.Apply(ctx, cfg, defs)
}
