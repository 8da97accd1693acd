#!/bin/sh
# Offline build of the benchctl sandbox image (no container registry needed):
#   mmdebstrap (Debian packages from packages.txt) -> rootfs tarball -> `docker import`
#   -> `docker build -f Dockerfile.offline` (user, dirs, entrypoint).
# Needs: mmdebstrap (apt-get install -y mmdebstrap), a reachable Debian mirror, Docker Engine.
# Usage: sandboxes/build-offline.sh [TAG]          (default TAG: benchctl-sandbox:latest)
#        sandboxes/build-offline.sh --rootfs-only OUT.tar   (just the mmdebstrap step; used by
#                                                            `benchctl images build`, which then
#                                                            imports and builds via the Docker API)
# Env:   SUITE (bookworm), MIRROR (from apt sources if unset), ROOTFS_IMAGE (benchctl-rootfs:bookworm)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
rootfs_only=
if [ "${1:-}" = "--rootfs-only" ]; then
    rootfs_only=${2:?--rootfs-only needs an output path, e.g. /tmp/rootfs.tar}
fi
tag=${1:-benchctl-sandbox:latest}
suite=${SUITE:-bookworm}
rootfs_image=${ROOTFS_IMAGE:-benchctl-rootfs:$suite}

command -v mmdebstrap >/dev/null 2>&1 || {
    echo "build-offline.sh: mmdebstrap not found; install it with: apt-get install -y mmdebstrap" >&2
    exit 2
}
[ -n "$rootfs_only" ] || command -v docker >/dev/null 2>&1 || {
    echo "build-offline.sh: docker CLI not found (or use --rootfs-only and import via the API)" >&2; exit 2; }

include=$(grep -v '^#' "$here/packages.txt" | grep -v '^[[:space:]]*$' | paste -sd, -)
workdir=$(mktemp -d "${TMPDIR:-/tmp}/benchctl-rootfs.XXXXXX")
trap 'rm -rf "$workdir"' EXIT INT TERM
out="$workdir/rootfs.tar"
[ -z "$rootfs_only" ] || out=$rootfs_only

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
    "$suite" "$out" ${MIRROR:-}
[ -z "$rootfs_only" ] || exit 0

echo "==> docker import -> $rootfs_image"
docker import "$out" "$rootfs_image" >/dev/null

echo "==> docker build -f Dockerfile.offline -> $tag"
docker build -q --build-arg "ROOTFS_IMAGE=$rootfs_image" -f "$here/Dockerfile.offline" -t "$tag" "$here"
echo "==> built $tag (offline path)"
