# The cache directory of install-helm.sh and upstream/build.sh: $ALLOCWATCH_CACHE,
# or by default /var/cache/allocwatch for root (CI) and
# ${XDG_CACHE_HOME:-~/.cache}/allocwatch for anyone else. Sourced, not run.
# (hack/cluster runs as root only and defaults to /var/cache/allocwatch itself.)
# shellcheck shell=bash
allocwatch_cache_dir() {
  if [ -n "${ALLOCWATCH_CACHE:-}" ]; then echo "$ALLOCWATCH_CACHE"
  elif [ "$(id -u)" = 0 ]; then echo /var/cache/allocwatch
  else echo "${XDG_CACHE_HOME:-$HOME/.cache}/allocwatch"
  fi
}
