# shellcheck shell=bash
# Sourced, not run, by build.sh (kube-apiserver) and
# deploy/deploytest/build-kubectl.sh (kubectl): the Kubernetes version the
# test tools are pinned to, and the linker flags that stamp it into a
# binary built from Go modules (a `go build` outside Kubernetes' own
# Makefile leaves the version variables empty, and then kube-apiserver and
# kubectl report v0.0.0, which the build scripts' cache checks reject).
# The cache folders are named after KUBE_VERSION
# (~/.cache/federation-autoscaler/kube-<v>, kubectl-<v>); testcluster.go's
# KubeVersion and deploytest's kubeVersion must match it.

KUBE_VERSION=v1.35.4

# kube_version_ldflags: prints the -X flags (with a leading space) for the
# two packages that hold Kubernetes' version variables.
kube_version_ldflags() {
  local major minor p flags=""
  major="${KUBE_VERSION#v}"; major="${major%%.*}"
  minor="${KUBE_VERSION#v*.}"; minor="${minor%%.*}"
  for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
    flags+=" -X ${p}.gitVersion=${KUBE_VERSION} -X ${p}.gitMajor=${major} -X ${p}.gitMinor=${minor}"
    flags+=" -X ${p}.gitTreeState=clean"
  done
  printf '%s' "${flags}"
}
