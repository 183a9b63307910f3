#!/usr/bin/env bash
# Hub container: mint the stack's bearer tokens on first start, then run the hub.
#
# There is no secrets service, so the hub writes the tokens into a volume that
# the machines mount read-only (TETHERBED_TOKEN_DIR):
#   agent.token   the machines' agents authenticate with it
#   client.token  the machines' healthcheck asks the hub whether their agent
#                 is connected; humans and tests may mint their own instead
#                 (`tetherbed hub token create ... --kind client`).
# Both belong to TETHERBED_USER, so a client of that user sees every
# machine's session. Arguments are passed on to `tetherbed hub`.
set -euo pipefail

state=${TETHERBED_HUB_STATE:-/var/lib/tetherbed/hub}
tokens=${TETHERBED_TOKEN_DIR:-/run/tetherbed/tokens}
user=${TETHERBED_USER:-tetherbed}
port=${TETHERBED_HUB_LISTEN_PORT:-8765}
# The address machines reach the hub at, for dsh-computers install commands
# (join.sh); it never comes from a request header.
public_url=${TETHERBED_PUBLIC_URL:-}

log() { echo "hub-entrypoint: $*" >&2; }

mkdir -p "$state" "$tokens"
# A new database knows none of the tokens left in the volume: mint new ones.
fresh=no
[[ -e $state/hub.sqlite3 ]] || fresh=yes

mint() {
    local kind=$1 file=$tokens/$1.token
    if [[ $fresh == yes || ! -s $file ]]; then
        # Write then rename, so a machine never reads half a token.
        (umask 077 && tetherbed hub token create --state "$state" --user "$user" \
            --kind "$kind" >"$file.tmp")
        mv "$file.tmp" "$file"
        log "minted the $kind token for user $user into $file"
    fi
}
mint agent
mint client

extra=()
[[ -n $public_url ]] && extra+=(--public-url "$public_url")
exec tetherbed hub --listen "0.0.0.0:$port" --state "$state" "${extra[@]}" "$@"
