#!/usr/bin/env bash
# Removes what consumer-up.sh created. See README.md.
set -euo pipefail
FA_SCRIPT="consumer-down.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fa_down_main consumer federation-autoscaler "The adapter PKI folder (local) is kept; virtual nodes and peerings the
agent made are not touched: scale the workloads down and let the agent
release them first." "$@"
