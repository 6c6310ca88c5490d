#!/usr/bin/env bash
# Give pytensor a BLAS to link against: Debian's OpenBLAS (libopenblas-dev).
# Without it pytensor warns "could not link to a BLAS installation" and falls back to slow
# NumPy-C-API dot products (see docs/blas.md for what that costs on our models).
set -euo pipefail
if ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so '; then
  exit 0
fi
if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = "0" ]; then
  echo "Installing libopenblas-dev (BLAS for pytensor)..."
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq libopenblas-dev >/dev/null
elif command -v apt-get >/dev/null 2>&1 && command -v sudo >/dev/null 2>&1; then
  sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq libopenblas-dev >/dev/null
else
  echo "ERROR: libopenblas not found and cannot install it (need apt-get as root)." >&2
  echo "Install an OpenBLAS development package, then re-run." >&2
  exit 1
fi
