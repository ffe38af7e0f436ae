#!/usr/bin/env bash
# Install the Debian packages named in a list file (one per line, '#' comments) that are not installed yet.
# Services that packages would start at install time are not started: the harness starts its own peers.
set -euo pipefail
list=${1:?usage: install-system-packages.sh LIST_FILE}
mapfile -t wanted < <(sed -e 's/#.*//' "$list" | awk 'NF {print $1}' | sort -u)
missing=()
for pkg in "${wanted[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
[ ${#missing[@]} -eq 0 ] && exit 0
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null; then
    echo "missing Debian packages: ${missing[*]} (install them as root with apt-get)" >&2
    exit 1
fi
echo "installing Debian packages: ${missing[*]}" >&2
# policy-rc.d 101: packages must not start their services (e.g. a system-wide RabbitMQ on port 5672).
policy=/usr/sbin/policy-rc.d
restore_policy=false
if [ ! -e "$policy" ]; then
    printf '#!/bin/sh\nexit 101\n' > "$policy" && chmod +x "$policy" && restore_policy=true
fi
trap '$restore_policy && rm -f "$policy"' EXIT
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
