#!/usr/bin/env bash
# Removes what central-up.sh created. See README.md.
set -euo pipefail
FA_SCRIPT="central-down.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF2
Usage: central-down.sh [options]

Deletes every object central-up.sh applied (labels
app.kubernetes.io/part-of=federation-autoscaler and
app.kubernetes.io/component=central) from --namespace and the cluster, and
the namespace itself when central-up.sh created it and no other role uses
it. Deletion is requested without waiting for finalizers.
The broker's database volume is deleted too; the federation CA in
--pki-dir (a local folder) is kept.

${FA_COMMON_HELP}
EOF2
}

FA_NAMESPACE="federation-autoscaler"
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
fa_down central
