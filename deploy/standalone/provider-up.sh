#!/usr/bin/env bash
# Deploys the provider agent of a member cluster that lends capacity.
# See deploy/standalone/README.md and docs/deploy.md.
set -euo pipefail
FA_SCRIPT="provider-up.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
Usage: provider-up.sh --bundle FILE [options]

Applies deploy/manifests/provider: namespace, this project's CRDs, the
provider agent's ServiceAccount and RBAC, the Secret provider-bundle (the
join bundle as bundle.tar.gz), the ConfigMap provider-sharing (what this
cluster lends), the agent Deployment and a NodePort Service (console,
latency probe). Safe to re-run. Liqo itself is the admin's to install
('liqoctl install ...'); this script only checks it is there.

Options:
  --bundle FILE           provider join bundle from 'central-up.sh join --role provider' (required)
  --sharing-file FILE     sharing configuration (docs/agents.md); default: deploy/manifests/provider/sharing.yaml
  --liqo-driver D         liqoctl (real Liqo, default; the image must contain
                          liqoctl: build it with --build-arg WITH_LIQOCTL=true)
                          or sim (labs without Liqo)
  --console-node-port N   node port of the provider console (default 30445)
  --mock-geo-url URL      geolocation service (e.g. the mocks' http://NODE:30480)
  --mock-eco-url URL      carbon-intensity service (e.g. http://NODE:30481)
${FA_COMMON_HELP}
EOF
}

FA_NAMESPACE="federation-autoscaler"
bundle=""
sharing=""
driver=liqoctl
console_port=30445
geo_url=""
eco_url=""
while (($#)); do
  if fa_common_flag "$@"; then shift "${FA_SHIFT}"; continue; fi
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --bundle) fa_need_value "$@"; bundle="$2"; shift 2 ;;
    --sharing-file) fa_need_value "$@"; sharing="$2"; shift 2 ;;
    --liqo-driver) fa_need_value "$@"; driver="$2"; shift 2 ;;
    --console-node-port) fa_need_value "$@"; console_port="$2"; shift 2 ;;
    --mock-geo-url) fa_need_value "$@"; geo_url="$2"; shift 2 ;;
    --mock-eco-url) fa_need_value "$@"; eco_url="$2"; shift 2 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

[[ -n "${bundle}" ]] || die "--bundle FILE is required: the provider join bundle made by 'central-up.sh join --role provider'"
fa_check_name --namespace "${FA_NAMESPACE}"
fa_check_port --console-node-port "${console_port}"
fa_check_driver "${driver}"
[[ -z "${sharing}" || -f "${sharing}" ]] || die "--sharing-file ${sharing}: no such file"
fa_check_url --mock-geo-url "${geo_url}"
fa_check_url --mock-eco-url "${eco_url}"
fa_read_bundle "${bundle}" provider
fa_check_image
fa_need_kubectl
fa_need_cluster
if [[ "${driver}" == liqoctl ]] && ! fa_has_crd foreignclusters.core.liqo.io; then
  die "Liqo is not installed on this cluster (no foreignclusters.core.liqo.io CRD): install Liqo v1.1.2 first ('liqoctl install <provider>'), or pass --liqo-driver sim for a lab without Liqo"
fi

fa_workdir
fa_namespace_plan provider
extra=()
[[ "${driver}" == liqoctl ]] && extra+=(provider/liqoctl)
fa_overlay_begin provider "${extra[@]}"
args="$(fa_agent_args "${driver}" "${geo_url:+--mock-geo-url=${geo_url}}" "${eco_url:+--mock-eco-url=${eco_url}}")"
args+="
$(fa_restart_on "${bundle}")"
fa_overlay_patch Deployment provider-agent "${args}"
fa_overlay_patch Service provider-agent "- op: replace
  path: /spec/ports/0/nodePort
  value: ${console_port}"
fa_overlay_generators_begin provider
fa_overlay_secret provider-bundle "bundle.tar.gz=${bundle}"
[[ -n "${sharing}" ]] && fa_overlay_configmap provider-sharing "sharing.yaml=${sharing}"
fa_overlay_generators_end
fa_render
if [[ "${driver}" == sim ]]; then
  fa_drop_optional provider clusterrolebinding.rbac.authorization.k8s.io/federation-autoscaler:provider-liqoctl \
    clusterrole.rbac.authorization.k8s.io/federation-autoscaler:provider-liqoctl
fi
fa_apply
if [[ "${FA_DRY_RUN}" != true ]]; then
  note "provider ${FA_BUNDLE_CLUSTER_ID} deployed in namespace ${FA_NAMESPACE} (broker ${FA_BUNDLE_BROKER_URL}, Liqo driver ${driver})"
  echo "Check: kubectl -n ${FA_NAMESPACE} logs deploy/provider-agent; the broker dashboard lists ${FA_BUNDLE_CLUSTER_ID} within 30 s"
fi
