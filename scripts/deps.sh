#!/bin/sh
# Installs what remat needs to build and test: Debian packages (compiler,
# CMake for the pip build, cJSON, clang for the sanitizers and fuzzers,
# cppcheck, the Python headers torch.compile's CPU code builds against) and
# a virtual environment .venv with the Python packages of
# scripts/requirements-dev.txt.
# PYTHON picks the interpreter for the venv (default: python3 on the PATH).
set -e
cd "$(dirname "$0")/.."
pkgs="build-essential pkg-config cmake libcjson-dev clang libclang-rt-14-dev llvm cppcheck python3 python3-venv python3-dev"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
fi
PY=${PYTHON:-python3}
stamp=.venv/.deps-$(cksum < scripts/requirements-dev.txt | cut -d' ' -f1)
[ -f "$stamp" ] && exit 0
[ -x .venv/bin/python ] || "$PY" -m venv .venv
export PIP_CONSTRAINT="$PWD/scripts/constraints.txt" PIP_DISABLE_PIP_VERSION_CHECK=1
# torch first, alone: the CPU wheel on this machine, never a CUDA build.
.venv/bin/python -m pip install -q torch==2.13.0
.venv/bin/python -m pip install -q -r scripts/requirements-dev.txt
rm -f .venv/.deps-*; touch "$stamp"
