# The cache directory of the hack/ scripts: $ALLOCWATCH_CACHE, or by default
# /var/cache/allocwatch for root (CI, the local cluster) and
# ${XDG_CACHE_HOME:-~/.cache}/allocwatch for anyone else. Sourced, not run.
# shellcheck shell=bash
allocwatch_cache_dir() {
  if [ -n "${ALLOCWATCH_CACHE:-}" ]; then echo "$ALLOCWATCH_CACHE"
  elif [ "$(id -u)" = 0 ]; then echo /var/cache/allocwatch
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/allocwatch"
  fi
}
