#!/usr/bin/env bash
# Offline validation of the deployment and the dashboard; needs no cluster.
#
#   deploy/validate.sh
#
# 1. renders the kustomize base (kubectl kustomize deploy/kubernetes);
# 2. validates every rendered object against the Kubernetes API schemas, strictly
#    (unknown fields are errors), with kubernetes-validate. Install it in a virtualenv
#    outside the repository and put it on PATH (or point KUBERNETES_VALIDATE at it):
#        python3 -m venv ~/kv-venv && ~/kv-venv/bin/pip install kubernetes-validate
#        PATH=~/kv-venv/bin:$PATH deploy/validate.sh
#    K8S_VERSION picks the Kubernetes version (default 1.33.0);
# 3. checks the cluster map (cluster.toml) by ferry's own rules and against the
#    StatefulSets (deploy/checks/check_cluster_map.py);
# 4. checks the Grafana dashboard: valid JSON, every panel with a datasource and
#    targets, every query using only PromQL and the names of
#    deploy/grafana/metrics-used.txt (deploy/checks/check_dashboard.py). With
#    FERRY_METRICS_URLS="http://host:9100/metrics ..." it also checks that every one of
#    those names is exported by one of those processes.
#
# What it does not do: run anything on a cluster, check the PromQL with promtool or the
# dashboard with a Grafana, or check the Prometheus adapter rule.
# Exits non-zero on the first failing step.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
k8s_version="${K8S_VERSION:-1.33.0}"
validator="${KUBERNETES_VALIDATE:-kubernetes-validate}"
python="${PYTHON:-python3}"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
out="$work/ferry.yaml"

step() { printf '\n== %s\n' "$*"; }

step "kubectl kustomize deploy/kubernetes"
command -v kubectl >/dev/null || { echo "FAIL kubectl is not installed"; exit 1; }
kubectl kustomize "$here/kubernetes" >"$out"
echo "rendered $(grep -c '^kind:' "$out") objects:"
grep '^kind:' "$out" | sort | uniq -c

step "kubernetes-validate --strict (Kubernetes $k8s_version)"
command -v "$validator" >/dev/null || {
  echo "FAIL $validator not found: pip install kubernetes-validate (in a virtualenv), see the top of this script"
  exit 1
}
"$validator" --version
if ! "$validator" --strict --kubernetes-version "$k8s_version" "$out" | sed "s|$out|ferry.yaml|"; then
  echo "FAIL kubernetes-validate"
  exit 1
fi

step "cluster map"
"$python" "$here/checks/check_cluster_map.py" "$here/kubernetes/cluster.toml" --manifests "$out"

step "Grafana dashboard"
scrape=()
for url in ${FERRY_METRICS_URLS:-}; do scrape+=(--scrape "$url"); done
"$python" "$here/checks/check_dashboard.py" "$here/grafana/ferry.json" \
  "$here/grafana/metrics-used.txt" ${scrape[@]+"${scrape[@]}"}

step "all checks passed"
