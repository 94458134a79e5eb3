#!/usr/bin/env bash
# Builds the real control plane the integration tests run (kube-apiserver and
# etcd) from Go modules into a cache folder outside the repository:
#   ${FA_KUBE_ASSETS:-$HOME/.cache/federation-autoscaler/kube-v1.35.4}
# Idempotent: when both binaries exist and report the pinned versions it only
# prints them. A cold build takes 6–11 min on 2 cores (~2 GB peak memory,
# ~3 GB Go build cache); later runs take well under a second.
# The versions live in kubebin/go.mod and etcdbin/go.mod next to this script.
set -euo pipefail

ETCD_VERSION=3.6.5
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# KUBE_VERSION and kube_version_ldflags: one pin for the control plane and kubectl.
# shellcheck source=kube-version.sh
source "${here}/kube-version.sh"
assets="${FA_KUBE_ASSETS:-${HOME}/.cache/federation-autoscaler/kube-${KUBE_VERSION}}"
mkdir -p "${assets}"

# The version output is captured before matching: `prog --version | grep -q`
# fails under pipefail when grep exits before prog has written everything.
reports() { # reports <binary> <exact line>
  local out
  [[ -x "$1" ]] && out="$("$1" --version 2>/dev/null)" && grep -qxF "$2" <<<"${out}"
}
apiserver_ok() { reports "${assets}/kube-apiserver" "Kubernetes ${KUBE_VERSION}"; }
etcd_ok() { reports "${assets}/etcd" "etcd Version: ${ETCD_VERSION}"; }

# build <module dir> <package> <output name> [ldflags]: builds to a temporary
# name and renames, so an interrupted build never leaves a half-written binary
# (the name carries the PID: two builds at once, e.g. two test packages, do
# not rename each other's output).
build() {
  local dir="$1" pkg="$2" out="$3" ldflags="${4:-}"
  echo "build.sh: building ${out} from ${pkg} (module ${dir##*/}) into ${assets}" >&2
  local start=${SECONDS}
  (cd "${dir}" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go build -trimpath -ldflags "-s -w ${ldflags}" -o "${assets}/.${out}.tmp.$$" "${pkg}")
  mv -f "${assets}/.${out}.tmp.$$" "${assets}/${out}"
  echo "build.sh: ${out} built in $((SECONDS - start)) s" >&2
}

if ! apiserver_ok; then
  build "${here}/kubebin" k8s.io/kubernetes/cmd/kube-apiserver kube-apiserver "$(kube_version_ldflags)"
fi
if ! etcd_ok; then
  build "${here}/etcdbin" go.etcd.io/etcd/server/v3 etcd
fi

apiserver_ok || { echo "build.sh: ${assets}/kube-apiserver does not report ${KUBE_VERSION}" >&2; exit 1; }
etcd_ok || { echo "build.sh: ${assets}/etcd does not report ${ETCD_VERSION}" >&2; exit 1; }
echo "build.sh: control plane ready in ${assets}:"
echo "  $("${assets}/kube-apiserver" --version)"
echo "  $("${assets}/etcd" --version | head -1)"
