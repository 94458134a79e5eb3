#!/usr/bin/env bash
# Builds the kubectl the deploy tests run the standalone scripts with, from
# the Go module in kubectlbin/ (k8s.io/kubectl at the test control plane's
# version), into a cache folder outside the repository:
#   ${FA_KUBECTL_DIR:-$HOME/.cache/federation-autoscaler/kubectl-v1.35.4}/kubectl
# Debian's kubernetes-client is too old (1.20: no kustomize v5, old
# server-side apply), so the tests never rely on whatever kubectl is on PATH.
# Idempotent: a no-op when the binary reports the pinned version. Cold: a few
# minutes on 2 cores.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# KUBE_VERSION and kube_version_ldflags: one pin for kubectl and the control plane.
# shellcheck source=../testcluster/kube-version.sh
source "${here}/../testcluster/kube-version.sh"
out="${FA_KUBECTL_DIR:-${HOME}/.cache/federation-autoscaler/kubectl-${KUBE_VERSION}}"
mkdir -p "${out}"

kubectl_ok() {
  local v
  [[ -x "${out}/kubectl" ]] && v="$("${out}/kubectl" version --client 2>/dev/null)" &&
    [[ "${v}" == *"Client Version: ${KUBE_VERSION}"$'\n'* ]]
}

if ! kubectl_ok; then
  vflags="$(kube_version_ldflags)"
  echo "build-kubectl.sh: building kubectl ${KUBE_VERSION} into ${out}" >&2
  start=${SECONDS}
  (cd "${here}/kubectlbin" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go build -trimpath -ldflags "-s -w ${vflags}" -o "${out}/.kubectl.tmp.$$" .)
  mv -f "${out}/.kubectl.tmp.$$" "${out}/kubectl"
  echo "build-kubectl.sh: kubectl built in $((SECONDS - start)) s" >&2
fi
kubectl_ok || { echo "build-kubectl.sh: ${out}/kubectl does not report ${KUBE_VERSION}" >&2; exit 1; }
echo "build-kubectl.sh: $("${out}/kubectl" version --client | head -1) in ${out}"
