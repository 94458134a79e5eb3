#!/usr/bin/env bash
# Deploys the federation broker (central role) and mints join bundles.
# See deploy/standalone/README.md and docs/deploy.md.
set -euo pipefail
FA_SCRIPT="central-up.sh"
# shellcheck source-path=SCRIPTDIR source=lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

usage() {
  cat <<EOF
Usage:
  central-up.sh [options]                   deploy or update the broker
  central-up.sh join --cluster-id ID --role provider|consumer [--out FILE]
                                            mint a join bundle for a member cluster

Deploy: creates the federation CA and the broker certificate with
'federation-autoscaler pki init' in --pki-dir when missing (ca.key never
leaves that folder), then applies deploy/manifests/central: namespace,
ServiceAccount, the Secret broker-tls (ca.crt, broker.crt, broker.key), the
broker Deployment, its data volume and a NodePort Service. Prints the broker
URL and the dashboard URL. Safe to re-run.

Options:
  --host H                 name or IP agents use to reach the broker; repeatable
                           (default: the API server's host from the kubeconfig)
  --pki-dir DIR            folder of the federation CA (default ./federation-pki)
  --api-node-port N        node port of the Broker API (default 30443)
  --dashboard-node-port N  node port of the dashboard (default 30444)
  --dashboard-token-file F bearer token for the dashboard (stored in Secret
                           broker-dashboard); without it the dashboard is open
                           to whoever reaches the node port
  --ha                     apply deploy/manifests/central/ha instead: the
                           broker's CRDs and two replicas with their state in
                           this cluster's API server and an elected leader
                           (no data volume; docs/operations.md)
Join options:
  --cluster-id ID          the member cluster's id (DNS-1123 label)
  --role R                 provider or consumer
  --out FILE               bundle path (default ./<ID>.tar.gz, mode 0600)
  --broker-url URL         default: the URL recorded by the last deploy
  --pki-dir DIR            as above
${FA_COMMON_HELP}
EOF
}

FA_NAMESPACE="federation-autoscaler"
pki_dir="./federation-pki"
api_port=30443
dash_port=30444
token_file=""
hosts=()
base="central"
mode="deploy"
cluster_id=""
role=""
out=""
broker_url=""
if [[ "${1:-}" == join ]]; then
  mode="join"
  shift
fi
while (($#)); do
  if fa_common_flag "$@"; then shift "${FA_SHIFT}"; continue; fi
  case "$1" in
    -h | --help) usage; exit 0 ;;
    --host) fa_need_value "$@"; hosts+=("$2"); shift 2 ;;
    --pki-dir) fa_need_value "$@"; pki_dir="$2"; shift 2 ;;
    --api-node-port) fa_need_value "$@"; api_port="$2"; shift 2 ;;
    --dashboard-node-port) fa_need_value "$@"; dash_port="$2"; shift 2 ;;
    --dashboard-token-file) fa_need_value "$@"; token_file="$2"; shift 2 ;;
    --ha) base="central/ha"; shift ;;
    --cluster-id) fa_need_value "$@"; cluster_id="$2"; shift 2 ;;
    --role) fa_need_value "$@"; role="$2"; shift 2 ;;
    --out) fa_need_value "$@"; out="$2"; shift 2 ;;
    --broker-url) fa_need_value "$@"; broker_url="$2"; shift 2 ;;
    *) die "unknown argument $1 (see --help)" ;;
  esac
done

if [[ "${mode}" == join ]]; then
  [[ -n "${cluster_id}" ]] || die "join needs --cluster-id ID (the member cluster's name, a DNS-1123 label)"
  fa_check_name --cluster-id "${cluster_id}"
  [[ "${role}" == provider || "${role}" == consumer ]] || die "join needs --role provider or --role consumer"
  fa_need_bin
  [[ -f "${pki_dir}/ca.key" ]] || die "no federation CA in --pki-dir ${pki_dir}: run central-up.sh first (or pass the --pki-dir it used)"
  if [[ -z "${broker_url}" ]]; then
    [[ -f "${pki_dir}/broker-url" ]] || die "no --broker-url and none recorded in ${pki_dir}/broker-url: pass --broker-url https://HOST:PORT"
    broker_url="$(<"${pki_dir}/broker-url")"
  fi
  out="${out:-./${cluster_id}.tar.gz}"
  [[ ! -e "${out}" ]] || die "${out} exists: a bundle is an identity, remove it or choose another --out"
  "${FA_BIN}" pki join --dir "${pki_dir}" --cluster-id "${cluster_id}" --role "${role}" \
    --broker-url "${broker_url}" --out "${out}" >&2
  note "bundle for ${role} ${cluster_id} written to ${out} (mode 0600; it holds a private key: send it over scp/ssh or a secrets manager, never chat or e-mail)"
  note "on the ${role} cluster: deploy/standalone/${role}-up.sh --bundle ${out##*/}"
  exit 0
fi

fa_check_name --namespace "${FA_NAMESPACE}"
fa_check_port --api-node-port "${api_port}"
fa_check_port --dashboard-node-port "${dash_port}"
[[ "${api_port}" != "${dash_port}" ]] || die "--api-node-port and --dashboard-node-port must differ"
fa_check_image
if [[ -n "${token_file}" ]]; then
  [[ -f "${token_file}" ]] || die "--dashboard-token-file ${token_file}: no such file"
  token="$(tr -d '[:space:]' <"${token_file}")"
  ((${#token} >= 16)) || die "--dashboard-token-file ${token_file}: the token has ${#token} characters, use at least 16 (e.g. head -c 24 /dev/urandom | base64)"
  unset token
fi
fa_need_kubectl
fa_need_cluster
fa_need_bin

if ((${#hosts[@]} == 0)); then
  server="$(kc config view --minify -o 'jsonpath={.clusters[0].cluster.server}')"
  server="${server#*://}"
  server="${server%%/*}"
  if [[ "${server}" == \[* ]]; then server="${server%%]*}"; server="${server#[}"; else server="${server%%:*}"; fi
  [[ -n "${server}" ]] || die "cannot tell the broker's address from the kubeconfig: pass --host NAME-OR-IP"
  hosts=("${server}")
fi
for h in "${hosts[@]}"; do
  [[ "${h}" =~ ^[A-Za-z0-9.:-]+$ ]] || die "--host \"${h}\" is not a DNS name or IP address"
done
broker_host="${hosts[0]}"
if [[ "${broker_host}" == *:* ]]; then url_host="[${broker_host}]"; else url_host="${broker_host}"; fi
broker_url="https://${url_host}:${api_port}"
dashboard_url="http://${url_host}:${dash_port}/"

# The CA is made once; later runs reuse it (replacing it would invalidate
# every bundle). A dry run makes it too: the manifests hold the broker's
# certificate, and a dry run prints the same bytes as the real run.
if [[ ! -f "${pki_dir}/ca.crt" ]]; then
  svc_hosts="broker.${FA_NAMESPACE}.svc,broker.${FA_NAMESPACE}.svc.cluster.local"
  host_list="$(IFS=,; echo "${hosts[*]}")"
  "${FA_BIN}" pki init --dir "${pki_dir}" --host "${host_list},${svc_hosts}" >&2
  note "created the federation CA in ${pki_dir} (keep ca.key offline-safe; the cluster only gets ca.crt and the broker's certificate)"
else
  note "using the federation CA and broker certificate in ${pki_dir} (their host names were fixed when they were made; a new --host needs a new --pki-dir and new bundles)"
fi
for f in ca.crt broker.crt broker.key; do
  [[ -f "${pki_dir}/${f}" ]] || die "${pki_dir}/${f} is missing: the PKI folder is incomplete; restore it or start over in a new --pki-dir"
done
if [[ "${FA_DRY_RUN}" != true ]]; then printf '%s\n' "${broker_url}" >"${pki_dir}/broker-url"; fi

fa_workdir
fa_namespace_plan central
fa_overlay_begin "${base}"
fa_overlay_patch Service broker "- op: replace
  path: /spec/ports/0/nodePort
  value: ${api_port}
- op: replace
  path: /spec/ports/1/nodePort
  value: ${dash_port}"
restart_files=("${pki_dir}/ca.crt" "${pki_dir}/broker.crt" "${pki_dir}/broker.key")
[[ -n "${token_file}" ]] && restart_files+=("${token_file}")
fa_overlay_patch Deployment broker "$(fa_restart_on "${restart_files[@]}")"
fa_overlay_generators_begin central
fa_overlay_secret broker-tls "ca.crt=${pki_dir}/ca.crt" "broker.crt=${pki_dir}/broker.crt" "broker.key=${pki_dir}/broker.key"
if [[ -n "${token_file}" ]]; then
  fa_overlay_secret broker-dashboard "token=${token_file}"
fi
fa_overlay_generators_end
fa_render
fa_apply
if [[ "${FA_DRY_RUN}" != true ]]; then
  note "broker deployed in namespace ${FA_NAMESPACE}"
  echo "Broker URL:    ${broker_url}"
  echo "Dashboard URL: ${dashboard_url}"
  echo "Next: central-up.sh join --cluster-id ID --role provider|consumer --pki-dir ${pki_dir}"
fi
