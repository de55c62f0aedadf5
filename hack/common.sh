# Sourced by hack's scripts, never run: where builds are cached, the Go that
# builds them, and one way to log.
# shellcheck shell=bash

# The cache directory: $ALLOCWATCH_CACHE, or by default /var/cache/allocwatch
# for root (CI) and ${XDG_CACHE_HOME:-~/.cache}/allocwatch for anyone else.
allocwatch_cache_dir() {
  if [ -n "${ALLOCWATCH_CACHE:-}" ]; then echo "$ALLOCWATCH_CACHE"
  elif [ "$(id -u)" = 0 ]; then echo /var/cache/allocwatch
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/allocwatch"
  fi
}

# The Go toolchain: go on PATH, else the one the machines ship in /usr/local/go.
find_go() {
  if command -v go >/dev/null 2>&1; then command -v go
  elif [ -x /usr/local/go/bin/go ]; then echo /usr/local/go/bin/go
  else return 1
  fi
}

# One line on stderr, named for the script ($LOG_NAME, else its file name).
log() { printf '%s: %s\n' "${LOG_NAME:-${0##*/}}" "$*" >&2; }
die() { log "$*"; exit 1; }
