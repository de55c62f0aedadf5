# A pinned upstream source: its tarball beside the repository, checked against
# its sha256, else a shallow git clone of its commit. Sourced, not run, by the
# hack/upstream builders; the caller defines log and die.
# shellcheck shell=bash
#
# A pin file holds repository=, commit=, tarball= and tarball_sha256= lines.

UPSTREAM_HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
# the directory the repository sits in, where shared/upstream/ is looked for
UPSTREAM_BESIDE=$(cd "$UPSTREAM_HERE/../../.." && pwd)

# pin_value PIN KEY: one value of a pin file.
pin_value() { sed -n "s/^$2=//p" "$1"; }

# locate_source PIN VAR: set SOURCE_TARBALL (the checked tarball, or empty for a
# git clone) and SOURCE_KEY (tar-<sha256> or git-<commit>, abbreviated). A
# tarball named by the environment variable VAR must exist; the default one
# beside the repository is optional. The sha256 is checked on every run, warm
# or cold: a cached build must not stand in for a tarball that has since
# changed under the same name.
locate_source() {
  local pin=$1 sha got
  sha=$(pin_value "$pin" tarball_sha256)
  if [ -n "${!2:-}" ]; then
    SOURCE_TARBALL=${!2}
    [ -f "$SOURCE_TARBALL" ] || die "$2=$SOURCE_TARBALL: no such file"
  else
    SOURCE_TARBALL=$UPSTREAM_BESIDE/shared/upstream/$(pin_value "$pin" tarball)
    [ -f "$SOURCE_TARBALL" ] || SOURCE_TARBALL=
  fi
  if [ -n "$SOURCE_TARBALL" ]; then
    got=$(sha256sum "$SOURCE_TARBALL" | cut -d' ' -f1)
    [ "$got" = "$sha" ] ||
      die "$SOURCE_TARBALL has sha256 $got, not the pinned $sha (hack/upstream/$(basename "$pin")); refusing to build it"
    SOURCE_KEY=tar-${sha:0:12}
  else
    SOURCE_KEY=git-$(pin_value "$pin" commit | cut -c1-12)
  fi
}

# unpack_source PIN DEST [REPOSITORY]: the located source into the empty
# directory DEST; set SOURCE_ORIGIN to a line saying where it came from.
unpack_source() {
  local pin=$1 dest=$2 commit repository head
  commit=$(pin_value "$pin" commit)
  repository=${3:-$(pin_value "$pin" repository)}
  if [ -n "$SOURCE_TARBALL" ]; then
    log "building from $SOURCE_TARBALL"
    tar xzf "$SOURCE_TARBALL" -C "$dest" --strip-components=1 || die "cannot unpack $SOURCE_TARBALL"
    SOURCE_ORIGIN="$(basename "$SOURCE_TARBALL") sha256 $(pin_value "$pin" tarball_sha256) ($commit)"
    return
  fi
  log "no upstream tarball; cloning $commit from $repository"
  git -C "$dest" init -q
  # git's own complaint first, then ours as the last line
  if ! git -C "$dest" fetch -q --depth 1 "$repository" "$commit" 2>"$dest/.git/fetch.err"; then
    cat "$dest/.git/fetch.err" >&2
    die "cannot fetch $commit from $repository (no tarball at ../shared/upstream/ either)"
  fi
  git -C "$dest" -c advice.detachedHead=false checkout -q FETCH_HEAD
  head=$(git -C "$dest" rev-parse HEAD)
  [ "$head" = "$commit" ] || die "$repository gave $head for the pinned $commit"
  SOURCE_ORIGIN="$repository@$commit"
}
