#!/usr/bin/env bash
# Installs what the tests need into the git-ignored .cache folder: Go modules, Node.js 22
# from npm's node@22 package, and the npm peers listed in testdata/npm/package.json (into
# $TOOLGATE_NPM_DIR when set, the folder the tests read them from; else .cache/npm); and,
# when missing, Debian's postgresql package (the server binaries the PostgreSQL store
# tests run, internal/testenv/postgres.go; nothing is started here).
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
if ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 && ! command -v initdb >/dev/null 2>&1; then
  echo "deps: postgresql (Debian package)" >&2
  if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
    echo "deps: PostgreSQL's initdb and postgres are missing; install Debian's postgresql package (apt-get install postgresql)" >&2
    exit 1
  fi
  # The package would create and start a system-wide "main" cluster; the tests start
  # their own throw-away server instead.
  mkdir -p /etc/postgresql-common/createcluster.d
  echo "create_main_cluster = false" >/etc/postgresql-common/createcluster.d/toolgate-tests.conf
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -q >&2
  apt-get install -y -q --no-install-recommends -o Dpkg::Options::=--force-confold postgresql >&2
fi
pg_bin=$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)
echo "deps: ready (node $(node --version), postgres $("${pg_bin:-/usr/bin}/postgres" --version 2>/dev/null | awk '{print $3}'))" >&2
