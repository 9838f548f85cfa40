#!/usr/bin/env bash
# Mutation testing of the code serializability rests on: the store (versions, locks, OCC
# commit, validated reads) and the transaction state both runtimes share (func/src/tx.rs).
# Installs cargo-mutants if missing, then lists every mutant the tests did not catch.
#   scripts/mutants.sh [extra cargo-mutants flags, e.g. -j 2]
# A run takes 20–40 minutes on 2 cores; results land in mutants.out/ (outcomes.json,
# missed.txt, caught.txt).
set -euo pipefail
cd "$(dirname "$0")/.."

if ! command -v cargo-mutants >/dev/null 2>&1; then
  echo "installing cargo-mutants..." >&2
  cargo install --locked cargo-mutants
fi
cargo mutants --file 'crates/store/src/**/*.rs' --file crates/func/src/tx.rs --timeout 180 "$@"
