#!/usr/bin/env bash
# Installs what the tests need into the git-ignored .cache folder: Go modules, Node.js 22
# from npm's node@22 package, and the npm peers listed in testdata/npm/package.json (into
# $TOOLGATE_NPM_DIR when set, the folder the tests read them from; else .cache/npm).
# Idempotent: a second run with nothing changed does no network work.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cache="$root/.cache"
mkdir -p "$cache"

echo "deps: go modules" >&2
(cd "$root" && go mod download)

node_dir="$cache/node22"
if [ ! -x "$node_dir/node_modules/.bin/node" ]; then
  echo "deps: node@22 from npm" >&2
  mkdir -p "$node_dir"
  npm install --no-audit --no-fund --loglevel=error --prefix "$node_dir" node@22 >&2
fi
export PATH="$node_dir/node_modules/.bin:$PATH"
node --version | grep -q '^v22\.' || { echo "deps: node 22 not found after install" >&2; exit 1; }

peers="${TOOLGATE_NPM_DIR:-$cache/npm}"
mkdir -p "$peers"
if ! cmp -s "$root/testdata/npm/package.json" "$peers/package.json" || [ ! -d "$peers/node_modules" ]; then
  echo "deps: npm peers into $peers" >&2
  cp "$root/testdata/npm/package.json" "$peers/package.json"
  (cd "$peers" && npm install --no-audit --no-fund --loglevel=error >&2)
fi
# Both releases of the conformance suite name their executable "conformance", and npm
# links whichever it installs last; the name stays the pinned release's
# (@modelcontextprotocol/conformance), and the tests start the alias
# (@modelcontextprotocol/conformance-next) by its path.
ln -sfn ../@modelcontextprotocol/conformance/dist/index.js "$peers/node_modules/.bin/conformance"
echo "deps: ready (node $(node --version))" >&2
