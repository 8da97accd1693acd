#!/bin/sh
# Image setup shared by Dockerfile and Dockerfile.offline (run as root during `docker build`):
# the non-root agent user and the fixed in-sandbox directories from benchctl/sandbox/base.py.
set -eu
groupadd --gid 1000 agent
useradd --uid 1000 --gid 1000 --create-home --home-dir /home/agent --shell /bin/bash agent
mkdir -p /work /data /gateway /opt/benchctl
chown agent:agent /work /home/agent
chmod 0755 /work /home/agent
# Slim the image: docs, man pages and apt lists are not needed at run time.
rm -rf /var/lib/apt/lists/* /usr/share/doc/* /usr/share/man/* /usr/share/info/* /var/cache/apt/*.bin
