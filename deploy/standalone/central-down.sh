#!/usr/bin/env bash
# Removes what central-up.sh created. See README.md.
set -euo pipefail
FA_SCRIPT="central-down.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

fa_down_main central federation-autoscaler "The broker's database volume is deleted too; the federation CA in
--pki-dir (a local folder) is kept." "$@"
