#!/usr/bin/env bash
# Removes what mock-up.sh created. See README.md.
set -euo pipefail
FA_SCRIPT="mock-down.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF2
Usage: mock-down.sh [options]

Deletes every object mock-up.sh applied (labels
app.kubernetes.io/part-of=federation-autoscaler and
app.kubernetes.io/component=mocks) from --namespace and the cluster, and
the namespace itself when mock-up.sh created it and no other role uses
it. Deletion is requested without waiting for finalizers.

${FA_COMMON_HELP}
EOF2
}

FA_NAMESPACE="federation-autoscaler-mocks"
while (($#)); do
  if fa_common_flag "$@"; then shift "${FA_SHIFT}"; continue; fi
  case "$1" in
    -h | --help) usage; exit 0 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done
fa_check_name --namespace "${FA_NAMESPACE}"
fa_need_kubectl
fa_need_cluster
fa_down mocks
