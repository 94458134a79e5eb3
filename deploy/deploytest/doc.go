// Package deploytest holds the tests of the deployment artefacts: the
// Dockerfile (static lint), the kustomize folders in deploy/manifests
// (rendered with a pinned kubectl, checked for least privilege and
// hardening, validated by a real kube-apiserver with server-side dry-run)
// and the standalone scripts in deploy/standalone (shellcheck; every *-up.sh
// applied for real to a real kube-apiserver, re-run, compared with its
// --dry-run output, torn down with its *-down.sh; failures stop with one
// clear line). It has no non-test code; build-kubectl.sh builds the kubectl
// the tests use (kubectlbin/, a separate module) into a cache folder.
package deploytest
