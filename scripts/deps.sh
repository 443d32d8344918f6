#!/bin/sh
# Installs what remat needs to build and test, from Debian's packages.
set -e
pkgs="build-essential pkg-config libcjson-dev python3 python3-numpy python3-matplotlib python3-torch python3-torchvision"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
[ -z "$missing" ] && exit 0
SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing
