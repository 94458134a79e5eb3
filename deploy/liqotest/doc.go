// Package liqotest is the Liqo conformance suite: the agents' liqoctl driver
// (agent/liqo) run for real against Liqo's own code on a real kube-apiserver
// (deploy/testcluster). The real liqoctl v1.1.2, built from the Go module
// proxy by build-liqoctl.sh (module liqoctlbin) into the test cache; Liqo's
// CRDs from its chart in the module cache; Liqo's own ResourceSlice
// validating webhook handler (pkg/webhooks/resourceslice) served over TLS and
// registered as Liqo's chart registers it; a minimal stand-in for the rest of
// a Liqo install (the clusterid ConfigMap, the peering-user roles, the
// controller-manager Deployment liqoctl reads) and for the controllers a
// test control plane lacks (a CSR signer, the namespace finaliser). Every
// driver call runs as the agent's ServiceAccount with the shipped RBAC
// (deploy/rbac), by impersonation, and is repeated and started from every
// partial state a crash can leave. See docs/liqo.md.
//
// What it cannot cover: `liqoctl peer`, which needs Liqo's controllers,
// gateways and networking running in two clusters.
package liqotest
