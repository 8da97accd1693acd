#!/bin/sh
# Offline build of the benchctl sandbox image (no container registry needed):
#   mmdebstrap (Debian packages from packages.txt) -> rootfs tarball -> `docker import`
#   -> `docker build -f Dockerfile.offline` (user, dirs, entrypoint).
# Needs: mmdebstrap (apt-get install -y mmdebstrap), a reachable Debian mirror, Docker Engine.
# Usage: sandboxes/build-offline.sh [TAG]          (default TAG: benchctl-sandbox:latest)
# Env:   SUITE (bookworm), MIRROR (from apt sources if unset), ROOTFS_IMAGE (benchctl-rootfs:bookworm)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
tag=${1:-benchctl-sandbox:latest}
suite=${SUITE:-bookworm}
rootfs_image=${ROOTFS_IMAGE:-benchctl-rootfs:$suite}

command -v mmdebstrap >/dev/null 2>&1 || {
    echo "build-offline.sh: mmdebstrap not found; install it with: apt-get install -y mmdebstrap" >&2
    exit 2
}
command -v docker >/dev/null 2>&1 || { echo "build-offline.sh: docker CLI not found" >&2; exit 2; }

include=$(grep -v '^#' "$here/packages.txt" | grep -v '^[[:space:]]*$' | paste -sd, -)
workdir=$(mktemp -d "${TMPDIR:-/tmp}/benchctl-rootfs.XXXXXX")
trap 'rm -rf "$workdir"' EXIT INT TERM

echo "==> mmdebstrap $suite (minbase + $include)"
# Docs/man/locales are excluded at unpack time to keep the tarball small.
# shellcheck disable=SC2086
mmdebstrap --variant=minbase --include="$include" \
    --dpkgopt='path-exclude=/usr/share/man/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' \
    --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    --dpkgopt='path-exclude=/usr/share/info/*' \
    --dpkgopt='path-exclude=/usr/share/locale/*' \
    --aptopt='Acquire::Languages "none"' \
    "$suite" "$workdir/rootfs.tar" ${MIRROR:-}

echo "==> docker import -> $rootfs_image"
docker import "$workdir/rootfs.tar" "$rootfs_image" >/dev/null

echo "==> docker build -f Dockerfile.offline -> $tag"
docker build -q --build-arg "ROOTFS_IMAGE=$rootfs_image" -f "$here/Dockerfile.offline" -t "$tag" "$here"
echo "==> built $tag (offline path)"
