#!/usr/bin/env bash
# Deploys mock-geo and mock-eco (labs and demos). See README.md.
set -euo pipefail
FA_SCRIPT="mock-up.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF2
Usage: mock-up.sh [options]

Applies deploy/manifests/mocks: namespace, a token-less ServiceAccount, the
mock-geo and mock-eco Deployments and NodePort Services. Agents use them
with --mock-geo-url http://NODE:GEO_PORT and --mock-eco-url
http://NODE:ECO_PORT. Safe to re-run.

Options:
  --geo-node-port N   node port of mock-geo (default 30480)
  --eco-node-port N   node port of mock-eco (default 30481)
${FA_COMMON_HELP}
EOF2
}

FA_NAMESPACE="federation-autoscaler-mocks"
geo_port=30480
eco_port=30481
while (($#)); do
  if fa_common_flag "$@"; then shift "${FA_SHIFT}"; continue; fi
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --geo-node-port) fa_need_value "$@"; geo_port="$2"; shift 2 ;;
    --eco-node-port) fa_need_value "$@"; eco_port="$2"; shift 2 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
fa_check_name --namespace "${FA_NAMESPACE}"
fa_check_port --geo-node-port "${geo_port}"
fa_check_port --eco-node-port "${eco_port}"
[[ "${geo_port}" != "${eco_port}" ]] || die "--geo-node-port and --eco-node-port must differ"
fa_check_image
fa_need_kubectl
fa_need_cluster

fa_workdir
fa_namespace_plan mocks
fa_overlay_begin mocks
fa_overlay_patch Service mock-geo "- op: replace
  path: /spec/ports/0/nodePort
  value: ${geo_port}"
fa_overlay_patch Service mock-eco "- op: replace
  path: /spec/ports/0/nodePort
  value: ${eco_port}"
fa_render
fa_apply
if [[ "${FA_DRY_RUN}" != true ]]; then
  note "mocks deployed in namespace ${FA_NAMESPACE}"
  echo "mock-geo: http://<node address>:${geo_port}   mock-eco: http://<node address>:${eco_port}"
fi
