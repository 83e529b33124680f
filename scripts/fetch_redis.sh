#!/usr/bin/env bash
# Debian's redis-server, which the local NDIF stack (scripts/ndif_stack.py) uses for its queue. A no-op once installed.
set -euo pipefail
if command -v redis-server >/dev/null 2>&1; then
  exit 0
fi
if [ "$(id -u)" -eq 0 ]; then as_root=(); elif command -v sudo >/dev/null 2>&1; then as_root=(sudo); else
  echo "fetch_redis.sh: installing Debian's redis-server needs root (or sudo)" >&2; exit 1
fi
"${as_root[@]}" apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends redis-server >/dev/null
