#!/usr/bin/env bash
# Removes what provider-up.sh created. See README.md.
set -euo pipefail
FA_SCRIPT="provider-down.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fa_down_main provider federation-autoscaler "" "$@"
