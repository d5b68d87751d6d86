#!/usr/bin/env bash
# scripts/chroot_test.sh: the README's test command as a new user meets it. A fresh
# Debian 12 (debootstrap --variant=minbase bookworm), a clean clone of this checkout's
# HEAD in /root/clipdb (/root is mode 0700: other users cannot enter the checkout), no
# /dev/pts (no pseudo-terminal), no GPU and no nvcc; then, inside, exactly CI's
# `CI=true scripts/setup.sh test` (.ci/run). Prints setup.sh's last lines (its stage
# summaries and skipped tests) and exits with its status.
#
#   sudo scripts/chroot_test.sh            whole run (long: the build, the suite, the
#                                          ASan + UBSan suite, the fuzzers, at JOBS)
#   KEEP=1 sudo scripts/chroot_test.sh     keep the chroot afterwards (to look, or to run
#                                          again with CHROOT=DIR: no second debootstrap)
#
# Root only (debootstrap, chroot, mounts); it installs debootstrap on the host when it is
# missing (the only change outside the chroot). The mounts (proc, sysfs, a tmpfs on
# /dev/shm) live in a private mount namespace (unshare -m), so they go away with it.
# Not part of CI: it takes as long as CI and downloads a Debian system.
#
# Environment: CHROOT (default: a new folder under /var/tmp, removed at the end unless
# KEEP=1), MIRROR (default http://deb.debian.org/debian), JOBS (passed to setup.sh;
# default 1, the machine may be shared), CHROOT_ARGS (extra arguments for setup.sh
# test, e.g. "-R test_library" to try one test), CHROOT_ENV (extra NAME=value words for
# the run inside, e.g. "CLIPDB_TEST_QUICK=1"). The full output is CHROOT's
# /root/chroot_test.log, copied to /var/tmp/clipdb-chroot-test.log at the end.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf 'chroot_test: %s\n' "$*" >&2; }
[ "$(id -u)" -eq 0 ] || { say "needs root (debootstrap, chroot, mount)"; exit 2; }
MIRROR=${MIRROR:-http://deb.debian.org/debian}
JOBS=${JOBS:-1}
made=0
if [ -z "${CHROOT:-}" ]; then
  CHROOT=$(mktemp -d /var/tmp/clipdb-chroot.XXXXXX)
  made=1
fi
case "$CHROOT" in /*/*) ;; *) say "CHROOT must be an absolute folder below /: $CHROOT"; exit 2 ;; esac
cleanup() {
  [ ! -f "$CHROOT/root/chroot_test.log" ] || cp "$CHROOT/root/chroot_test.log" /var/tmp/clipdb-chroot-test.log
  if [ "$made" = 1 ] && [ "${KEEP:-0}" != 1 ]; then
    rm -rf --one-file-system "$CHROOT"
  else
    say "the chroot stays in $CHROOT"
  fi
}
trap cleanup EXIT

t0=$SECONDS
if [ ! -x "$CHROOT/usr/bin/apt-get" ]; then
  if ! command -v debootstrap >/dev/null 2>&1; then
    say "installing debootstrap on this machine"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends debootstrap >/dev/null
  fi
  say "debootstrap --variant=minbase bookworm into $CHROOT ($MIRROR)"
  debootstrap --variant=minbase bookworm "$CHROOT" "$MIRROR" >"$CHROOT.debootstrap.log" 2>&1 ||
    { tail -20 "$CHROOT.debootstrap.log" >&2; exit 1; }
  rm -f "$CHROOT.debootstrap.log"
  # no daemons started by package scripts inside the chroot
  printf '#!/bin/sh\nexit 101\n' >"$CHROOT/usr/sbin/policy-rc.d"
  chmod 755 "$CHROOT/usr/sbin/policy-rc.d"
  say "debootstrap done in $((SECONDS - t0)) s"
fi
cp /etc/resolv.conf "$CHROOT/etc/resolv.conf"
chmod 755 "$CHROOT" # its / (mktemp made it 0700: no other user could reach anything)
chmod 700 "$CHROOT/root"

# A clean clone of HEAD, as CI makes (host git: minbase has none). A rerun in the same
# CHROOT keeps the earlier clone's .deps/ (the FAISS C API, the photo set), as a
# developer's checkout keeps its cache.
rm -rf "$CHROOT/root/deps.keep"
[ ! -d "$CHROOT/root/clipdb/.deps" ] || mv "$CHROOT/root/clipdb/.deps" "$CHROOT/root/deps.keep"
rm -rf "$CHROOT/root/clipdb"
git clone -q --no-local "$here" "$CHROOT/root/clipdb"
[ ! -d "$CHROOT/root/deps.keep" ] || mv "$CHROOT/root/deps.keep" "$CHROOT/root/clipdb/.deps"
git -C "$CHROOT/root/clipdb" checkout -q "$(git -C "$here" rev-parse HEAD)"
say "testing $(git -C "$here" log -1 --format='%h %s' | cut -c1-72)"

# What runs inside: the README's command, after a line saying what the run is like.
printf '%s\n' '#!/bin/bash' \
  'echo "inside: uid $(id -u), /root mode $(stat -c %a /root), entries in /dev/pts: $(ls -A /dev/pts | wc -l)"' \
  "cd /root/clipdb && exec scripts/setup.sh test ${CHROOT_ARGS:-}" >"$CHROOT/root/run.sh"
chmod 700 "$CHROOT/root/run.sh"

# Inside: /proc, /sys and /dev/shm, and no /dev/pts. debootstrap's /dev has its nodes
# (null, zero, random, urandom, tty, ptmx) and an empty pts/: openpty fails.
log="$CHROOT/root/chroot_test.log"
t1=$SECONDS
rc=0
# shellcheck disable=SC2016,SC2086  # expanded inside; CHROOT_ENV is a word list
unshare -m --propagation private bash -c '
  set -e
  root=$1
  shift
  mount -t proc proc "$root/proc"
  mount -t sysfs sys "$root/sys"
  mkdir -p "$root/dev/shm" && mount -t tmpfs -o mode=1777 shm "$root/dev/shm"
  for n in null zero full random urandom tty; do # debootstrap in a container cannot mknod
    [ -c "$root/dev/$n" ] || { rm -f "$root/dev/$n"; touch "$root/dev/$n"; mount --bind "/dev/$n" "$root/dev/$n"; }
  done
  if mountpoint -q "$root/dev/pts"; then umount "$root/dev/pts"; fi
  exec chroot "$root" /usr/bin/env -i "$@" /root/run.sh
' - "$CHROOT" HOME=/root PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin \
  LANG=C.UTF-8 CI=true JOBS="$JOBS" ${CHROOT_ENV:-} >"$log" 2>&1 || rc=$?
say "setup.sh test exited $rc after $((SECONDS - t1)) s (the whole run: $((SECONDS - t0)) s); its last lines:"
grep -a -m1 '^inside:' "$log" >&2 || true
if grep -a -q '\[test suite\]' "$log"; then
  sed -n '/\[test suite\]/,$p' "$log" | tail -60 >&2
else
  tail -40 "$log" >&2
fi
exit "$rc"
