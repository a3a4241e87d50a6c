#!/bin/sh
# Installs the Debian packages cosmoflow.h needs when something is missing and we are root;
# otherwise says what to install.
need="build-essential libopenblas-dev libopenblas-openmp-dev mpich libmpich-dev zlib1g-dev libhdf5-dev pkg-config"
missing=""
for p in $need; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" = 0 ]; then
    echo "installing:$missing"
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $missing
else
    echo "missing Debian packages:$missing"
    echo "install them with: sudo apt-get install$missing"
    exit 1
fi
