#!/usr/bin/env bash
# Removes what mock-up.sh created. See README.md.
set -euo pipefail
FA_SCRIPT="mock-down.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fa_down_main mocks federation-autoscaler-mocks "" "$@"
