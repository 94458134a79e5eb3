#!/usr/bin/env bash
# Deploys the consumer side of a member cluster that borrows capacity: the
# consumer agent, the Cluster Autoscaler adapter and the upstream Cluster
# Autoscaler. See deploy/standalone/README.md and docs/deploy.md.
set -euo pipefail
FA_SCRIPT="consumer-up.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
Usage: consumer-up.sh --bundle FILE [options]

Creates the adapter's local PKI with 'federation-autoscaler pki adapter' in
--adapter-pki-dir when missing, then applies deploy/manifests/consumer:
namespace, this project's CRDs, ServiceAccounts and RBAC, the Secrets
consumer-bundle (the join bundle as bundle.tar.gz), adapter-tls (ca.crt,
server.crt, server.key) and cluster-autoscaler-tls (ca.crt, client.crt,
client.key), the ConsumerPolicy 'default', the consumer agent Deployment
with the adapter as a sidecar, the Cluster Autoscaler Deployment with its
externalgrpc cloud-config, and Services. Safe to re-run. Liqo itself is the
admin's to install ('liqoctl install ...'); this script only checks it.

Options:
  --bundle FILE           consumer join bundle from 'central-up.sh join --role consumer' (required)
  --adapter-pki-dir DIR   adapter PKI folder (default ./adapter-pki-<cluster id>)
  --placement P           Standard (default), Price, Eco or Latency
  --liqo-driver D         liqoctl (real Liqo, default; the image must contain
                          liqoctl: --build-arg WITH_LIQOCTL=true, and the agent
                          needs Liqo's installer-level RBAC, see docs/deploy.md)
                          or sim (labs without Liqo: also applies minimal Liqo
                          CRDs and the simulation's RBAC)
  --console-node-port N   node port of the consumer console (default 30446)
  --mock-geo-url URL      geolocation service (e.g. the mocks' http://NODE:30480)
${FA_COMMON_HELP}
EOF
}

FA_NAMESPACE="federation-autoscaler"
bundle=""
pki_dir=""
placement=Standard
driver=liqoctl
console_port=30446
geo_url=""
while (($#)); do
  if fa_common_flag "$@"; then shift "${FA_SHIFT}"; continue; fi
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --bundle) fa_need_value "$@"; bundle="$2"; shift 2 ;;
    --adapter-pki-dir) fa_need_value "$@"; pki_dir="$2"; shift 2 ;;
    --placement) fa_need_value "$@"; placement="$2"; shift 2 ;;
    --liqo-driver) fa_need_value "$@"; driver="$2"; shift 2 ;;
    --console-node-port) fa_need_value "$@"; console_port="$2"; shift 2 ;;
    --mock-geo-url) fa_need_value "$@"; geo_url="$2"; shift 2 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

[[ -n "${bundle}" ]] || die "--bundle FILE is required: the consumer join bundle made by 'central-up.sh join --role consumer'"
fa_check_name --namespace "${FA_NAMESPACE}"
fa_check_port --console-node-port "${console_port}"
fa_check_driver "${driver}"
case "${placement}" in
  Standard | Price | Eco | Latency) ;;
  *) die "--placement ${placement}: use Standard, Price, Eco or Latency (Weighted needs weights: edit the ConsumerPolicy afterwards)" ;;
esac
fa_check_url --mock-geo-url "${geo_url}"
fa_read_bundle "${bundle}" consumer
fa_check_image
fa_need_kubectl
fa_need_cluster
fa_need_bin
if [[ "${driver}" == liqoctl ]]; then
  fa_has_crd foreignclusters.core.liqo.io ||
    die "Liqo is not installed on this cluster (no foreignclusters.core.liqo.io CRD): install Liqo v1.1.2 first ('liqoctl install <provider>'), or pass --liqo-driver sim for a lab without Liqo"
else
  # The simulation brings minimal stand-ins of Liqo's CRDs; never put them
  # over the real ones.
  owner="$(kc get crd foreignclusters.core.liqo.io -o 'jsonpath={.metadata.labels.app\.kubernetes\.io/part-of}' 2>/dev/null || true)"
  if fa_has_crd foreignclusters.core.liqo.io && [[ "${owner}" != federation-autoscaler && "${owner}" != federation-autoscaler-liqo-sim ]]; then
    die "Liqo is installed on this cluster: use --liqo-driver liqoctl (the simulation's CRDs must not replace Liqo's)"
  fi
fi

pki_dir="${pki_dir:-./adapter-pki-${FA_BUNDLE_CLUSTER_ID}}"
adapter_hosts="adapter.${FA_NAMESPACE}.svc,adapter.${FA_NAMESPACE}.svc.cluster.local"
# The adapter PKI is made once and reused (a dry run makes it too: the
# manifests hold its certificates, and a dry run prints the same bytes).
if [[ ! -f "${pki_dir}/ca.crt" ]]; then
  "${FA_BIN}" pki adapter --dir "${pki_dir}" --host "${adapter_hosts}" >&2
  note "created the adapter PKI in ${pki_dir} (local to this cluster; keep it to re-run this script without rotating it)"
fi
for f in ca.crt server.crt server.key client.crt client.key; do
  [[ -f "${pki_dir}/${f}" ]] || die "${pki_dir}/${f} is missing: the adapter PKI folder is incomplete; remove it and re-run to make a new one"
done

fa_workdir
cat >"${FA_WORK}/cloud-config" <<EOF
address: "adapter.${FA_NAMESPACE}.svc:8086"
cacert: /etc/federation-autoscaler/ca-tls/ca.crt
cert: /etc/federation-autoscaler/ca-tls/client.crt
key: /etc/federation-autoscaler/ca-tls/client.key
grpc_timeout: 5s
EOF
fa_namespace_plan consumer
extra=()
[[ "${driver}" == sim ]] && extra+=(consumer/liqo-sim)
fa_overlay_begin consumer "${extra[@]}"
args="$(fa_agent_args "${driver}" "${geo_url:+--mock-geo-url=${geo_url}}")"
args+="
$(fa_restart_on "${bundle}" "${pki_dir}/ca.crt" "${pki_dir}/server.crt" "${pki_dir}/server.key")"
fa_overlay_patch Deployment consumer-agent "${args}"
fa_overlay_patch Deployment cluster-autoscaler "$(fa_restart_on "${pki_dir}/ca.crt" "${pki_dir}/client.crt" "${pki_dir}/client.key" "${FA_WORK}/cloud-config")"
fa_overlay_patch Service consumer-console "- op: replace
  path: /spec/ports/0/nodePort
  value: ${console_port}"
fa_overlay_patch ConsumerPolicy default "- op: replace
  path: /spec/placement/type
  value: ${placement}"
fa_overlay_generators_begin consumer
fa_overlay_secret consumer-bundle "bundle.tar.gz=${bundle}"
fa_overlay_secret adapter-tls "ca.crt=${pki_dir}/ca.crt" "server.crt=${pki_dir}/server.crt" "server.key=${pki_dir}/server.key"
fa_overlay_secret cluster-autoscaler-tls "ca.crt=${pki_dir}/ca.crt" "client.crt=${pki_dir}/client.crt" "client.key=${pki_dir}/client.key"
fa_overlay_configmap cluster-autoscaler-cloud-config "cloud-config=${FA_WORK}/cloud-config"
fa_overlay_generators_end
fa_render
if [[ "${driver}" == liqoctl ]]; then
  fa_drop_optional consumer clusterrolebinding.rbac.authorization.k8s.io/federation-autoscaler:consumer-liqo-sim \
    clusterrole.rbac.authorization.k8s.io/federation-autoscaler:consumer-liqo-sim \
    rolebinding.rbac.authorization.k8s.io/federation-autoscaler:consumer-liqo-sim \
    role.rbac.authorization.k8s.io/federation-autoscaler:consumer-liqo-sim
fi
fa_apply
if [[ "${FA_DRY_RUN}" != true ]]; then
  note "consumer ${FA_BUNDLE_CLUSTER_ID} deployed in namespace ${FA_NAMESPACE} (broker ${FA_BUNDLE_BROKER_URL}, Liqo driver ${driver}, placement ${placement})"
  echo "Check: kubectl -n ${FA_NAMESPACE} logs deploy/consumer-agent -c agent; kubectl -n ${FA_NAMESPACE} logs deploy/cluster-autoscaler"
fi
