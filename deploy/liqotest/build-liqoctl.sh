#!/usr/bin/env bash
# Builds the real liqoctl (the pinned Liqo release's CLI) that the Liqo
# conformance suite (deploy/liqotest) drives, from the Go module in
# liqoctlbin/, into a cache folder outside the repository:
#   ${FA_LIQOCTL_DIR:-$HOME/.cache/federation-autoscaler/liqoctl-v1.1.2}/liqoctl
# `go install github.com/liqotech/liqo/cmd/liqoctl@v1.1.2` cannot work: Go
# refuses to install a module whose go.mod has a replace directive, and Liqo
# replaces virtual-kubelet. liqoctlbin requires Liqo and copies that replace.
# The Dockerfile (WITH_LIQOCTL=true) builds the image's liqoctl the same way.
# Once built it is a no-op (the binary reports the pinned version). A cold
# build is long (liqoctl links helm and the cloud SDKs; docs/testing.md has
# the measured time), so .ci/setup starts it in the background and only the
# suite waits for it:
#
#   build-liqoctl.sh               build now, in the foreground
#   build-liqoctl.sh --background  start the build in the background (nice 10, log in
#                                  <dir>/build.log) and return at once
#   build-liqoctl.sh --wait SECS   never build: wait up to SECS for a build in
#                                  progress, then succeed iff liqoctl is there
#   build-liqoctl.sh --check       print one bin/setup-missing line when
#                                  liqoctl is not there (nothing otherwise)
#
# One build at a time per folder: the builder holds an exclusive flock on
# <dir>/.build.lock for the whole build (a background build takes it before
# it returns, so a --wait started right after cannot miss it).
set -euo pipefail

LIQO_VERSION=v1.1.2
SUITE="Liqo conformance suite (deploy/liqotest)"
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
out="${FA_LIQOCTL_DIR:-${HOME}/.cache/federation-autoscaler/liqoctl-${LIQO_VERSION}}"
lock="${out}/.build.lock"
log="${out}/build.log"
mkdir -p "${out}"

# `liqoctl version --client` prints "Client version: <v>".
liqoctl_ok() {
  local v
  [[ -x "${out}/liqoctl" ]] && v="$("${out}/liqoctl" version --client 2>/dev/null)" &&
    grep -qxF "Client version: ${LIQO_VERSION}" <<<"${v}"
}

# build: the build itself; the caller holds the lock (fd 9).
build() {
  echo "build-liqoctl.sh: building liqoctl ${LIQO_VERSION} into ${out}" >&2
  local start=${SECONDS}
  # The temporary name carries the PID: an interrupted build never leaves a
  # half-written binary under the final name.
  (cd "${here}/liqoctlbin" && CGO_ENABLED=0 GOFLAGS=-buildvcs=false \
    go build -trimpath \
    -ldflags "-s -w -X github.com/liqotech/liqo/pkg/liqoctl/version.LiqoctlVersion=${LIQO_VERSION}" \
    -o "${out}/.liqoctl.tmp.$$" github.com/liqotech/liqo/cmd/liqoctl)
  mv -f "${out}/.liqoctl.tmp.$$" "${out}/liqoctl"
  echo "build-liqoctl.sh: liqoctl built in $((SECONDS - start)) s" >&2
  liqoctl_ok || { echo "build-liqoctl.sh: ${out}/liqoctl does not report ${LIQO_VERSION}" >&2; return 1; }
  echo "build-liqoctl.sh: liqoctl ${LIQO_VERSION} in ${out}"
}

# log_tail: the end of the last build's log, for an error message.
log_tail() {
  [[ -s "${log}" ]] && { echo "last lines of ${log}:"; tail -n 15 "${log}"; }
  return 0
}

# The lock needs util-linux's flock (Debian: always there). Without it
# every mode degrades to its safe, slower form: --background builds in the
# foreground, --wait only looks.
have_flock=false
command -v flock >/dev/null && have_flock=true

case "${1:-}" in
"")
  liqoctl_ok && { echo "build-liqoctl.sh: liqoctl ${LIQO_VERSION} in ${out}"; exit 0; }
  if [[ "${have_flock}" == true ]]; then
    exec 9>"${lock}"
    flock 9 # another build of this folder finishes first
    liqoctl_ok && { echo "build-liqoctl.sh: liqoctl ${LIQO_VERSION} in ${out}"; exit 0; }
  fi
  build
  ;;
--background)
  liqoctl_ok && { echo "build-liqoctl.sh: liqoctl ${LIQO_VERSION} in ${out}"; exit 0; }
  if [[ "${have_flock}" != true ]]; then
    echo "build-liqoctl.sh: no flock: building in the foreground" >&2
    build
    exit
  fi
  exec 9>"${lock}"
  if ! flock -n 9; then
    echo "build-liqoctl.sh: a liqoctl build is already running (log: ${log})"
    exit 0
  fi
  # The background child inherits fd 9 and with it the lock; it outlives
  # this script (and `make setup`), and only the suite waits for it. It stays
  # in the caller's process group: Ctrl-C on `make test` stops it too.
  FA_LIQOCTL_LOCKED=1 nice -n 10 bash "${BASH_SOURCE[0]}" --locked-build </dev/null >"${log}" 2>&1 &
  echo "build-liqoctl.sh: building liqoctl ${LIQO_VERSION} in the background (pid $!, log: ${log}); deploy/liqotest waits for it"
  ;;
--locked-build) # the detached child of --background
  [[ "${FA_LIQOCTL_LOCKED:-}" == 1 ]] || { echo "build-liqoctl.sh: --locked-build is internal (use --background)" >&2; exit 2; }
  build
  ;;
--wait)
  secs="${2:-}"
  [[ "${secs}" =~ ^[0-9]+$ ]] || { echo "build-liqoctl.sh: --wait needs a number of seconds, got '${secs}'" >&2; exit 2; }
  if [[ "${have_flock}" == true ]]; then
    exec 9>"${lock}"
    if ! flock -s -w "${secs}" 9; then
      echo "build-liqoctl.sh: the liqoctl build (log: ${log}) was still running after ${secs} s" >&2
      log_tail >&2
      exit 1
    fi
  fi
  if ! liqoctl_ok; then
    echo "build-liqoctl.sh: no liqoctl ${LIQO_VERSION} in ${out} and no build running; build it with: bash deploy/liqotest/build-liqoctl.sh (or make setup)" >&2
    log_tail >&2
    exit 1
  fi
  echo "${out}/liqoctl"
  ;;
--check)
  liqoctl_ok && exit 0
  if [[ "${have_flock}" == true ]] && ! flock -n -s "${lock}" true; then
    echo "${SUITE}: liqoctl ${LIQO_VERSION} was still building in the background (log: ${log}); run the suite again when it is done"
  else
    last=""
    [[ -s "${log}" ]] && last=" (log of the last build: ${log})"
    echo "${SUITE}: no liqoctl ${LIQO_VERSION} in ${out}; build it with: bash deploy/liqotest/build-liqoctl.sh${last}"
  fi
  ;;
*)
  echo "build-liqoctl.sh: unknown argument '$1' (want none, --background, --wait SECS or --check)" >&2
  exit 2
  ;;
esac
