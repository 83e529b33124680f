#!/usr/bin/env bash
# The headless browser tests/test_docs_browser.py drives: Debian's Chromium, from Debian's packages.
#
#     bash scripts/fetch_browser.sh
#
# The Playwright driver comes with `uv sync` (the dev group); `playwright install` would download a
# browser build of its own, which this project does not rely on. Where a Chromium is already
# installed, or NNTERP_CHROMIUM names one, this does nothing. Elsewhere it installs Debian's
# `chromium` package with apt-get (as root, or through sudo): about 20 s and 113 MB the first time.
set -euo pipefail

if [ -n "${NNTERP_CHROMIUM:-}" ] && [ -x "${NNTERP_CHROMIUM}" ]; then
  exit 0
fi
for found in /usr/lib/chromium/chromium /usr/bin/chromium /usr/bin/chromium-browser; do
  if [ -x "$found" ]; then
    exit 0
  fi
done

if ! command -v apt-get >/dev/null 2>&1; then
  echo "fetch_browser.sh: no apt-get here; install Chromium or Chrome and set NNTERP_CHROMIUM to its binary" >&2
  exit 1
fi
if [ "$(id -u)" -eq 0 ]; then
  as_root=()
elif command -v sudo >/dev/null 2>&1; then
  as_root=(sudo)
else
  echo "fetch_browser.sh: installing Debian's chromium needs root (or sudo)" >&2
  exit 1
fi
echo "fetch_browser.sh: installing Debian's chromium for the documentation's browser test"
"${as_root[@]}" apt-get update -q >/dev/null
DEBIAN_FRONTEND=noninteractive "${as_root[@]}" apt-get install -y -q --no-install-recommends chromium >/dev/null
/usr/bin/chromium --version 2>/dev/null || true
