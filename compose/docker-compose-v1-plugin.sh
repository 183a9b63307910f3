#!/bin/sh
# `docker compose` for machines that only have Compose v1 (`docker-compose`,
# as Debian bookworm ships it). Installed by `make images` as a Docker CLI
# plugin when `docker compose` is missing, so the commands in compose/README.md
# work as written. Docker runs a plugin as `PLUGIN compose ARGS...`.
set -eu
if [ "${1:-}" = "docker-cli-plugin-metadata" ]; then
  printf '{"SchemaVersion":"0.1.0","Vendor":"Tetherbed","Version":"v1-shim","ShortDescription":"Docker Compose (v1 docker-compose underneath)"}\n'
  exit 0
fi
[ "${1:-}" = "compose" ] && shift
exec /usr/bin/docker-compose "$@"
