# shellcheck shell=bash
# Shared by the deploy/standalone scripts (sourced, never run). Every
# function that fails calls die, which prints ONE line saying what is wrong
# and what to do, and exits 1.
#
# The scripts render the role's kustomize folder (deploy/manifests/<role>)
# through a temporary overlay (namespace, image, node ports, Secrets from
# files) with `kubectl kustomize`, then either print that rendering
# (--dry-run) or server-side apply exactly the same bytes. Every object
# carries app.kubernetes.io/part-of=federation-autoscaler and
# app.kubernetes.io/component=<role>; the *-down.sh scripts delete by those
# labels.

# Variables set here are read by the scripts that source this file.
# shellcheck disable=SC2034
FA_PART_OF="app.kubernetes.io/part-of=federation-autoscaler"
FA_FIELD_MANAGER="federation-autoscaler-standalone"
FA_HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
FA_MANIFESTS="$(cd "${FA_HERE}/../manifests" && pwd)"

# Common options (set by fa_common_flag, read by the scripts).
FA_KUBECONFIG="${FA_KUBECONFIG:-}"
FA_IMAGE="${FA_IMAGE:-}"
FA_DRY_RUN=false
FA_NAMESPACE=""
FA_KUBECTL="${FA_KUBECTL:-kubectl}"
FA_BIN="${FA_BIN:-federation-autoscaler}"

die() {
  echo "${FA_SCRIPT:-fa}: error: $*" >&2
  exit 1
}

note() {
  echo "${FA_SCRIPT:-fa}: $*" >&2
}

# fa_common_flag NAME VALUE: consumes a common flag; returns 2 when NAME is
# not one (the caller then tries its own flags). Prints how many arguments
# it used (1 or 2) on success.
fa_need_value() {
  [[ $# -ge 2 && -n "$2" && "$2" != --* ]] || die "$1 needs a value (see --help)"
}

fa_common_flag() {
  case "$1" in
    --kubeconfig) fa_need_value "$@"; FA_KUBECONFIG="$2"; FA_SHIFT=2 ;;
    --image) fa_need_value "$@"; FA_IMAGE="$2"; FA_SHIFT=2 ;;
    --namespace) fa_need_value "$@"; FA_NAMESPACE="$2"; FA_SHIFT=2 ;;
    --kubectl) fa_need_value "$@"; FA_KUBECTL="$2"; FA_SHIFT=2 ;;
    --bin) fa_need_value "$@"; FA_BIN="$2"; FA_SHIFT=2 ;;
    --dry-run) FA_DRY_RUN=true; FA_SHIFT=1 ;;
    *) return 2 ;;
  esac
}

FA_COMMON_HELP="Common options:
  --kubeconfig FILE   kubeconfig of the target cluster (default: kubectl's)
  --namespace NS      namespace of this role's objects
  --image REF         federation-autoscaler image to run (required by the up
                      scripts; or FA_IMAGE): build and push it first, see
                      docs/deploy.md
  --dry-run           print the manifests a real run would apply (the same
                      bytes) or the objects down would delete; change nothing
                      in the cluster
  --kubectl PATH      kubectl to use (default: kubectl on PATH)
  --bin PATH          federation-autoscaler binary for 'pki' (default: on PATH)
  -h, --help          this help"

# kc runs kubectl against the chosen cluster.
kc() {
  if [[ -n "${FA_KUBECONFIG}" ]]; then
    "${FA_KUBECTL}" --kubeconfig "${FA_KUBECONFIG}" "$@"
  else
    "${FA_KUBECTL}" "$@"
  fi
}

# fa_check_name WHAT VALUE: a DNS-1123 label (namespaces, cluster ids).
fa_check_name() {
  [[ "$2" =~ ^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$ ]] ||
    die "$1 \"$2\" is not a DNS-1123 label: use lowercase letters, digits and '-', at most 63 characters"
}

# fa_check_port WHAT VALUE: a node port in the default range.
fa_check_port() {
  if [[ ! "$2" =~ ^[0-9]{5}$ ]] || ((10#$2 < 30000 || 10#$2 > 32767)); then
    die "$1 $2 is not a node port: use 30000-32767 (the default --service-node-port-range)"
  fi
}

# fa_check_driver VALUE: a --liqo-driver the agents know.
fa_check_driver() {
  [[ "$1" == liqoctl || "$1" == sim ]] || die "--liqo-driver $1: use liqoctl (real Liqo) or sim (labs)"
}

# fa_check_url WHAT VALUE: an http(s) URL without metacharacters (written
# into the rendered manifests).
fa_check_url() {
  local re='^https?://[A-Za-z0-9.:-]+(/[A-Za-z0-9._/-]*)?$'
  [[ -z "$2" || "$2" =~ ${re} ]] || die "$1 \"$2\" is not an http(s) URL like http://10.0.0.5:30480"
}

# fa_check_image: a plausible image reference without shell or YAML
# metacharacters (it is written into the rendered manifests).
fa_check_image() {
  [[ -n "${FA_IMAGE}" ]] ||
    die "--image REF is required: build and push the image (docker build -t REGISTRY/federation-autoscaler:VERSION .) and pass it, or set FA_IMAGE"
  [[ "${FA_IMAGE}" =~ ^[a-z0-9][a-z0-9._/:@-]*$ ]] ||
    die "--image \"${FA_IMAGE}\" is not an image reference like registry.example.org/federation-autoscaler:v1.0.0"
}

# fa_need_kubectl: kubectl must be installed (never downloaded here).
fa_need_kubectl() {
  command -v "${FA_KUBECTL}" >/dev/null 2>&1 ||
    die "kubectl not found (${FA_KUBECTL}): install kubectl >= 1.27 (https://kubernetes.io/docs/tasks/tools/) or pass --kubectl PATH"
}

# fa_need_bin: our binary, for `pki`.
fa_need_bin() {
  command -v "${FA_BIN}" >/dev/null 2>&1 ||
    die "federation-autoscaler binary not found (${FA_BIN}): build it with 'make build' (bin/federation-autoscaler) and pass --bin PATH or put it on PATH"
}

# fa_need_cluster: the API server answers and is ready.
fa_need_cluster() {
  local out
  if ! out="$(kc get --raw /readyz --request-timeout=10s 2>&1)"; then
    out="${out//$'\n'/ }"
    die "cannot reach the cluster's API server (kubectl get --raw /readyz: ${out:0:200}): check --kubeconfig and that the cluster is up"
  fi
}

# fa_need_crd NAME HINT: a CRD must be installed (Liqo's, for instance).
fa_has_crd() {
  kc get customresourcedefinitions.apiextensions.k8s.io "$1" >/dev/null 2>&1
}

# fa_workdir: a private temporary folder removed on exit.
fa_workdir() {
  FA_WORK="$(mktemp -d "${TMPDIR:-/tmp}/fa-deploy.XXXXXX")"
  chmod 700 "${FA_WORK}"
  # shellcheck disable=SC2064 # expand now: the folder is known
  trap "rm -rf '${FA_WORK}'" EXIT
}

# fa_read_bundle FILE ROLE: checks a join bundle from `pki join` without
# extracting anything but join.yaml: a gzip tar with exactly ca.crt,
# tls.crt, tls.key and join.yaml, whose join.yaml names ROLE. Sets
# FA_BUNDLE_CLUSTER_ID, FA_BUNDLE_BROKER_URL. The agent verifies the
# certificates themselves at start.
fa_read_bundle() {
  local file="$1" role="$2" list names join got_role
  [[ -f "${file}" ]] || die "--bundle ${file}: no such file; ask the central admin for the bundle made by 'central-up.sh join'"
  list="$(tar -tzf "${file}" 2>/dev/null)" ||
    die "--bundle ${file} is not a join bundle (not a gzip tar): use the .tar.gz made by 'central-up.sh join' / 'federation-autoscaler pki join'"
  names="$(LC_ALL=C sort <<<"${list}" | tr '\n' ' ')"
  [[ "${names}" == "ca.crt join.yaml tls.crt tls.key " ]] ||
    die "--bundle ${file} is not a join bundle: it holds [${names% }], want exactly ca.crt join.yaml tls.crt tls.key; mint a new one with 'central-up.sh join'"
  join="$(tar -xzOf "${file}" join.yaml)" || die "--bundle ${file}: cannot read join.yaml"
  got_role="$(sed -n 's/^role:[[:space:]]*"\{0,1\}\([a-z]*\)"\{0,1\}[[:space:]]*$/\1/p' <<<"${join}")"
  FA_BUNDLE_CLUSTER_ID="$(sed -n 's/^clusterId:[[:space:]]*"\{0,1\}\([a-z0-9-]*\)"\{0,1\}[[:space:]]*$/\1/p' <<<"${join}")"
  FA_BUNDLE_BROKER_URL="$(sed -n 's/^brokerURL:[[:space:]]*"\{0,1\}\([^"]*\)"\{0,1\}[[:space:]]*$/\1/p' <<<"${join}")"
  [[ -n "${got_role}" && -n "${FA_BUNDLE_CLUSTER_ID}" && -n "${FA_BUNDLE_BROKER_URL}" ]] ||
    die "--bundle ${file}: join.yaml lacks role, clusterId or brokerURL; mint a new one with 'central-up.sh join'"
  [[ "${got_role}" == "${role}" ]] ||
    die "--bundle ${file} was issued for a ${got_role}, not a ${role}: use ${got_role}-up.sh with it, or ask for a ${role} bundle ('central-up.sh join --role ${role}')"
}

# fa_namespace_plan ROLE: decides whether this run owns the namespace. A
# namespace that exists without our component label belongs to someone
# else: it is used but not applied (and never deleted by down). Sets
# FA_OWN_NAMESPACE=true|false.
fa_namespace_plan() {
  local role="$1" got
  if ! got="$(kc get namespace "${FA_NAMESPACE}" -o 'jsonpath={.metadata.labels.app\.kubernetes\.io/component}' 2>/dev/null)"; then
    FA_OWN_NAMESPACE=true # absent: this run creates it
  elif [[ "${got}" == "${role}" ]]; then
    FA_OWN_NAMESPACE=true
  else
    FA_OWN_NAMESPACE=false
    note "namespace ${FA_NAMESPACE} exists and was not created by ${FA_SCRIPT}: using it, leaving the Namespace object alone"
  fi
}

# fa_overlay_begin ROLE: starts ${FA_WORK}/overlay/kustomization.yaml over
# deploy/manifests/ROLE (plus any extra folders given).
fa_overlay_begin() {
  local role="$1" base_ns="federation-autoscaler" dir rel
  shift
  [[ "${role}" == mocks ]] && base_ns="federation-autoscaler-mocks"
  FA_BASE_NAMESPACE="${base_ns}"
  FA_OVERLAY="${FA_WORK}/overlay"
  mkdir -p "${FA_OVERLAY}"
  {
    echo "# Rendered by ${FA_SCRIPT}; base: deploy/manifests/${role}"
    echo "apiVersion: kustomize.config.k8s.io/v1beta1"
    echo "kind: Kustomization"
    echo "namespace: ${FA_NAMESPACE}"
    echo "resources:"
    for dir in "${role}" "$@"; do
      rel="$(realpath --relative-to="${FA_OVERLAY}" "${FA_MANIFESTS}/${dir}")"
      echo "- ${rel}"
    done
    echo "images:"
    echo "- name: federation-autoscaler"
    echo "  newName: ${FA_IMAGE}"
    echo "patches:"
    if [[ "${FA_OWN_NAMESPACE}" != true ]]; then
      echo "- patch: |-"
      echo "    \$patch: delete"
      echo "    apiVersion: v1"
      echo "    kind: Namespace"
      echo "    metadata:"
      echo "      name: ${base_ns}"
    fi
  } >"${FA_OVERLAY}/kustomization.yaml"
}

# fa_restart_on FILE...: a JSON-patch op that annotates a pod template with
# a checksum of the files a Secret or ConfigMap is made from, so a re-run
# with a new bundle or certificate rolls the pods (mounted Secrets are not
# re-read by the programs) and a re-run with the same files changes nothing.
fa_restart_on() {
  local sum
  sum="$(sha256sum "$@" | cut -d' ' -f1 | sha256sum | cut -c1-16)"
  printf '%s\n' "- op: add" "  path: /spec/template/metadata/annotations" "  value:" \
    "    federation-autoscaler.io/config-checksum: \"${sum}\""
}

# fa_overlay_patch KIND NAME JSON6902-OPS-YAML: appends a patch.
fa_overlay_patch() {
  {
    echo "- target: {kind: $1, name: $2}"
    echo "  patch: |-"
    local line
    while IFS= read -r line; do echo "    ${line}"; done <<<"$3"
  } >>"${FA_OVERLAY}/kustomization.yaml"
}

# fa_overlay_secret NAME FILE-KEY=PATH...: a Secret from files (copied into
# the overlay; the generator refuses paths outside it). Generators are
# appended after the patches, so call them last.
fa_overlay_generators_begin() {
  {
    echo "generatorOptions:"
    echo "  disableNameSuffixHash: true"
    echo "  labels:"
    echo "    app.kubernetes.io/part-of: federation-autoscaler"
    echo "    app.kubernetes.io/component: ${1}"
  } >>"${FA_OVERLAY}/kustomization.yaml"
  FA_SECRETS=()
  FA_CONFIGMAPS=()
}

fa_overlay_secret() {
  local name="$1" kv key path
  shift
  mkdir -p "${FA_OVERLAY}/${name}"
  local files=()
  for kv in "$@"; do
    key="${kv%%=*}" path="${kv#*=}"
    install -m 600 "${path}" "${FA_OVERLAY}/${name}/${key}"
    files+=("${key}=${name}/${key}")
  done
  FA_SECRETS+=("${name}:${files[*]}")
}

fa_overlay_configmap() { # NAME KEY=PATH: replaces a ConfigMap of the base
  local name="$1" key="${2%%=*}" path="${2#*=}"
  mkdir -p "${FA_OVERLAY}/cm-${name}"
  install -m 644 "${path}" "${FA_OVERLAY}/cm-${name}/${key}"
  FA_CONFIGMAPS+=("${name}:${key}=cm-${name}/${key}")
}

fa_overlay_generators_end() {
  local entry f
  if ((${#FA_SECRETS[@]})); then
    echo "secretGenerator:" >>"${FA_OVERLAY}/kustomization.yaml"
    for entry in "${FA_SECRETS[@]}"; do
      {
        echo "- name: ${entry%%:*}"
        echo "  type: Opaque"
        echo "  files:"
        for f in ${entry#*:}; do echo "  - ${f}"; done
      } >>"${FA_OVERLAY}/kustomization.yaml"
    done
  fi
  if ((${#FA_CONFIGMAPS[@]})); then
    echo "configMapGenerator:" >>"${FA_OVERLAY}/kustomization.yaml"
    for entry in "${FA_CONFIGMAPS[@]}"; do
      {
        echo "- name: ${entry%%:*}"
        echo "  namespace: ${FA_BASE_NAMESPACE}"
        echo "  behavior: replace"
        echo "  files:"
        echo "  - ${entry#*:}"
      } >>"${FA_OVERLAY}/kustomization.yaml"
    done
  fi
}

# fa_render: kustomize the overlay into ${FA_WORK}/manifests.yaml.
fa_render() {
  local err
  FA_RENDERED="${FA_WORK}/manifests.yaml"
  if ! err="$(kc kustomize "${FA_OVERLAY}" 2>&1 >"${FA_RENDERED}")"; then
    err="${err//$'\n'/ }"
    die "rendering deploy/manifests failed (kubectl kustomize: ${err:0:300}): kubectl >= 1.27 is needed"
  fi
}

# fa_apply: print (--dry-run) or server-side apply the rendering, the same
# bytes either way. The scripts own what they apply: --force-conflicts takes
# over fields another manager set (an agent's CRD install, a hand edit), as
# a client-side `kubectl apply` would overwrite them.
fa_apply() {
  if [[ "${FA_DRY_RUN}" == true ]]; then
    note "dry run: these manifests would be applied (Secrets include key material; nothing was changed)"
    cat "${FA_RENDERED}"
    return
  fi
  local out
  if ! out="$(kc apply --server-side --force-conflicts --field-manager="${FA_FIELD_MANAGER}" -f "${FA_RENDERED}" 2>&1)"; then
    out="${out//$'\n'/ }"
    die "kubectl apply failed: ${out:0:400}"
  fi
  printf '%s\n' "${out}" >&2
}

# fa_drop_optional ROLE KIND/NAME...: an optional part a previous run applied
# (e.g. RBAC for another --liqo-driver) is removed when this run does not
# apply it, so re-running with other options converges. Only objects with
# this role's labels are touched. Namespaced kinds are looked up in
# --namespace (kubectl ignores -n for cluster-scoped ones).
fa_drop_optional() {
  local role="$1" obj comp
  shift
  for obj in "$@"; do
    comp="$(kc -n "${FA_NAMESPACE}" get "${obj}" -o 'jsonpath={.metadata.labels.app\.kubernetes\.io/component}' 2>/dev/null || true)"
    [[ "${comp}" == "${role}" ]] || continue
    if [[ "${FA_DRY_RUN}" == true ]]; then
      note "dry run: would delete ${obj} (not used with these options)"
    else
      kc -n "${FA_NAMESPACE}" delete "${obj}" --ignore-not-found --wait=false >&2
    fi
  done
}

# fa_down ROLE: deletes every object labelled part-of + component=ROLE that
# up created, namespaced ones in --namespace first, then cluster-scoped
# ones, then the namespace when this role created it and nothing else of
# the federation remains in it. --dry-run lists them instead.
FA_NAMESPACED_KINDS="deployments.apps,services,configmaps,secrets,serviceaccounts,roles.rbac.authorization.k8s.io,rolebindings.rbac.authorization.k8s.io,persistentvolumeclaims"
FA_CLUSTER_KINDS="clusterrolebindings.rbac.authorization.k8s.io,clusterroles.rbac.authorization.k8s.io"

fa_down() {
  local role="$1" sel="${FA_PART_OF},app.kubernetes.io/component=$1" kinds="${FA_NAMESPACED_KINDS}" ns_comp others
  if [[ "${role}" == consumer ]] && kc get crd consumerpolicies.autoscaling.federation-autoscaler.io >/dev/null 2>&1; then
    kinds="consumerpolicies.autoscaling.federation-autoscaler.io,${kinds}"
  fi
  local ns_exists=false
  if ns_comp="$(kc get namespace "${FA_NAMESPACE}" -o 'jsonpath={.metadata.labels.app\.kubernetes\.io/component}' 2>/dev/null)"; then
    ns_exists=true
  fi
  if [[ "${FA_DRY_RUN}" == true ]]; then
    note "dry run: these objects would be deleted (nothing was changed)"
    if [[ "${ns_exists}" == true ]]; then
      kc get "${kinds}" -n "${FA_NAMESPACE}" -l "${sel}" -o name
    fi
    kc get "${FA_CLUSTER_KINDS},customresourcedefinitions.apiextensions.k8s.io" -l "${sel}" -o name
    if [[ "${ns_exists}" == true && "${ns_comp}" == "${role}" ]]; then echo "namespace/${FA_NAMESPACE}"; fi
    return
  fi
  if [[ "${ns_exists}" == true ]]; then
    kc delete "${kinds}" -n "${FA_NAMESPACE}" -l "${sel}" --ignore-not-found --wait=false >&2
  fi
  kc delete "${FA_CLUSTER_KINDS},customresourcedefinitions.apiextensions.k8s.io" -l "${sel}" --ignore-not-found --wait=false >&2
  if [[ "${ns_exists}" == true && "${ns_comp}" == "${role}" ]]; then
    others="$(kc get "${FA_NAMESPACED_KINDS}" -n "${FA_NAMESPACE}" -l "${FA_PART_OF},app.kubernetes.io/component!=${role}" -o name 2>/dev/null | head -3 | tr '\n' ' ')"
    if [[ -n "${others}" ]]; then
      note "keeping namespace ${FA_NAMESPACE}: other federation-autoscaler roles still use it (${others% })"
    else
      kc delete namespace "${FA_NAMESPACE}" --ignore-not-found --wait=false >&2
    fi
  fi
  note "removed the ${role} objects from namespace ${FA_NAMESPACE} and the cluster"
}

# fa_down_main ROLE NAMESPACE NOTE ARGS...: the whole of ROLE's down
# script: parses ARGS (the common flags; --help prints the usage, NOTE
# being what the role keeps or leaves), --namespace defaulting to
# NAMESPACE, checks kubectl and the cluster, and runs fa_down ROLE.
fa_down_main() {
  local role="$1" note="$3" up="${FA_SCRIPT/-down/-up}"
  FA_NAMESPACE="$2"
  shift 3
  while (($#)); do
    if fa_common_flag "$@"; then shift "${FA_SHIFT}"; continue; fi
    case "$1" in
      -h | --help)
        cat <<EOF2
Usage: ${FA_SCRIPT} [options]

Deletes every object ${up} applied (labels
app.kubernetes.io/part-of=federation-autoscaler and
app.kubernetes.io/component=${role}) from --namespace and the cluster, and
the namespace itself when ${up} created it and no other role uses
it. Deletion is requested without waiting for finalizers.${note:+
${note}}

${FA_COMMON_HELP}
EOF2
        exit 0
        ;;
      *) die "unknown argument $1 (see --help)" ;;
    esac
  done
  fa_check_name --namespace "${FA_NAMESPACE}"
  fa_need_kubectl
  fa_need_cluster
  fa_down "${role}"
}

# fa_agent_args DRIVER [ARG...]: the JSON patch of an agent Deployment's
# arguments: --liqo-driver=DRIVER in place of the base's liqoctl, then each
# non-empty ARG appended (e.g. "${geo_url:+--mock-geo-url=${geo_url}}").
fa_agent_args() {
  local arg
  printf '%s' "- op: test
  path: /spec/template/spec/containers/0/args/4
  value: --liqo-driver=liqoctl
- op: replace
  path: /spec/template/spec/containers/0/args/4
  value: --liqo-driver=$1"
  shift
  for arg in "$@"; do
    if [[ -n "${arg}" ]]; then
      printf '%s' "
- op: add
  path: /spec/template/spec/containers/0/args/-
  value: ${arg}"
    fi
  done
}
