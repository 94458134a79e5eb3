#!/usr/bin/env bash
# Regenerates the Go code of externalgrpc.proto. Usage: generate.sh [OUT_DIR]
# (default: this folder). protoc comes from Debian (protobuf-compiler +
# libprotobuf-dev for the well-known types); the plugins are the Go tools
# pinned in go.mod, so the output is reproducible byte for byte.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
out="$(mkdir -p "${1:-$here}" && cd "${1:-$here}" && pwd)"
command -v protoc >/dev/null || {
  echo "generate.sh: protoc not found; install it with: apt-get install -y protobuf-compiler libprotobuf-dev" >&2
  exit 1
}
cd "$here"
gen_go="$(go tool -n protoc-gen-go)"
gen_grpc="$(go tool -n protoc-gen-go-grpc)"
protoc -I "$here" \
  --plugin=protoc-gen-go="$gen_go" --plugin=protoc-gen-go-grpc="$gen_grpc" \
  --go_out="$out" --go_opt=paths=source_relative \
  --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
  externalgrpc.proto
