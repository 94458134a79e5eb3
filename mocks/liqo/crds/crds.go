// Package crds embeds minimal CustomResourceDefinitions for the three Liqo
// kinds the simulated Liqo driver (mocks/liqo) reads and writes —
// ForeignCluster (core.liqo.io), ResourceSlice (authentication.liqo.io) and
// VirtualNode (offloading.liqo.io), all v1beta1 — so the simulation runs on
// an API server without Liqo. The schemas are free-form (spec and status
// preserve unknown fields) with a status subresource; they are this
// project's own, not Liqo's manifests.
package crds

import (
	"context"
	"embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/rest"

	facrds "github.com/federation-autoscaler/federation-autoscaler/deploy/crds"
)

//go:embed *.yaml
var manifests embed.FS

// All returns the embedded Liqo CRDs, sorted by name.
func All() ([]*apiextensionsv1.CustomResourceDefinition, error) {
	return facrds.Decode(manifests)
}

// Install creates or updates the embedded Liqo CRDs and waits until they
// are established. Do not use it on a cluster where Liqo is installed: it
// would replace Liqo's schemas.
func Install(ctx context.Context, cfg *rest.Config) error {
	defs, err := All()
	if err != nil {
		return err
	}
	return facrds.Apply(ctx, cfg, defs)
}
