#!/usr/bin/env bash
# Installs Debian's Chromium for the dashboard's browser tests (test/node/dashboard.browser.test.ts) when
# it is missing. Run as root (CI). The tests then run with REQUIRE_BROWSER=1, so a missing browser fails.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then
  echo "chromium present: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "chromium installed: $(/usr/bin/chromium --version 2>/dev/null || echo unknown version)"
