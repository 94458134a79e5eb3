#!/usr/bin/env bash
# Builds the real liqoctl (the pinned Liqo release's CLI) that the Liqo
# conformance suite (deploy/liqotest) drives, from the Go module in
# liqoctlbin/, into a cache folder outside the repository:
#   ${FA_LIQOCTL_DIR:-$HOME/.cache/federation-autoscaler/liqoctl-v1.1.2}/liqoctl
# `go install github.com/liqotech/liqo/cmd/liqoctl@v1.1.2` cannot work: Go
# refuses to install a module whose go.mod has a replace directive, and Liqo
# replaces virtual-kubelet. liqoctlbin requires Liqo and copies that replace.
# The Dockerfile (WITH_LIQOCTL=true) builds the image's liqoctl the same way.
# Idempotent: a no-op when the binary reports the pinned version. Cold: many
# minutes on 2 cores (liqoctl links helm and the cloud SDKs).
set -euo pipefail

LIQO_VERSION=v1.1.2
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${FA_LIQOCTL_DIR:-${HOME}/.cache/federation-autoscaler/liqoctl-${LIQO_VERSION}}"
mkdir -p "${out}"

# `liqoctl version --client` prints "Client version: <v>".
liqoctl_ok() {
  local v
  [[ -x "${out}/liqoctl" ]] && v="$("${out}/liqoctl" version --client 2>/dev/null)" &&
    grep -qxF "Client version: ${LIQO_VERSION}" <<<"${v}"
}

if ! liqoctl_ok; then
  echo "build-liqoctl.sh: building liqoctl ${LIQO_VERSION} into ${out}" >&2
  start=${SECONDS}
  # The temporary name carries the PID: two builds at once never rename each
  # other's half-written output.
  (cd "${here}/liqoctlbin" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go build -trimpath \
    -ldflags "-s -w -X github.com/liqotech/liqo/pkg/liqoctl/version.LiqoctlVersion=${LIQO_VERSION}" \
    -o "${out}/.liqoctl.tmp.$$" github.com/liqotech/liqo/cmd/liqoctl)
  mv -f "${out}/.liqoctl.tmp.$$" "${out}/liqoctl"
  echo "build-liqoctl.sh: liqoctl built in $((SECONDS - start)) s" >&2
fi
liqoctl_ok || { echo "build-liqoctl.sh: ${out}/liqoctl does not report ${LIQO_VERSION}" >&2; exit 1; }
echo "build-liqoctl.sh: liqoctl ${LIQO_VERSION} in ${out}"
