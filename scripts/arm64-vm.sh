#!/bin/bash
# Real aarch64 perf captures on an x86-64 Debian 12 host: a Debian 12 arm64 guest under
# qemu-system-aarch64 (TCG, no KVM) with perf 6.1 on an arm64 kernel builds the fixture worker
# (fixtures/src/arm64: a C++ executable and a shared library), records fp and dwarf captures of it
# with cpu-clock (plain perf, and jobprof-record cross-built for aarch64), prints the guest's own
# `perf script` text as ground truth and copies everything out (after ../shared/tools/arm64-vm.sh).
# Usage: OUTD=DIR SRC=CHECKOUT scripts/arm64-vm.sh [STAGE...]
#   stages: host jobprof rootfs image boot collect (default: all, in order), and release (not in
#   the default list): boots the guest once more with the aarch64 release tarball
#   ($SRC/dist/jobprof-*-aarch64-linux.tar.gz, from scripts/release.sh --target
#   aarch64-unknown-linux-gnu; TARBALL=FILE picks another), which unpacks it and runs its binaries
#   there: preflight, a capture with its jobprof-record, its jobprof process, and the native
#   symbolizer timed against the guest's `perf script` on dwarf captures (into $OUTD/release/)
# Idempotent: each stage skips work whose result is already there (delete the file to redo it).
# Cache: $C (default /var/cache/arm64-vm: debian debs, the rootfs, its ext4 image (IMG_SIZE, 3G), the kernel and
# initrd, the cross-built jobprof-record). Measured on the project machine (2 cores): debootstrap's
# second stage ~33 min the first time (the whole rootfs stage took 8.4 min on a quieter
# 2026-12-02), boot ~31 s; the release stage's guest run 8-13 min. Run it at low priority on a shared machine:
#   OUTD=/tmp/arm64-out SRC=$PWD nice -n 19 ionice -c3 scripts/arm64-vm.sh > /tmp/arm64-vm.log 2>&1 &
# Then: bash fixtures/make-arm64-fixtures.sh /tmp/arm64-out
set -euo pipefail
C=${C:-/var/cache/arm64-vm}
OUTD=${OUTD:-}
STEER=${STEER:-$(cd "$(dirname "$0")/.." && pwd)}
OUTD=${OUTD:?set OUTD to where the captures should go}
SRC=${SRC:?set SRC to the project checkout}
MIRROR=${MIRROR:-$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null)}
SUITE=bookworm
ROOTFS=${ROOTFS:-$C/rootfs}
SHARE=$C/share
IMG=${IMG:-$C/rootfs.ext4}
mkdir -p "$C" "$SHARE"
T0=$(date +%s)
t() { echo "[arm64-vm $(date +%T) +$(( $(date +%s) - T0 ))s] $*"; }
timed() { local s; s=$(date +%s); "$@"; local rc=$?; t "$1 took $(( $(date +%s) - s ))s (rc=$rc)"; return $rc; }

# ---------------------------------------------------------------- host packages
st_host() {
  local want="qemu-system-arm qemu-user-static binfmt-support debootstrap gcc-aarch64-linux-gnu libc6-dev-arm64-cross e2fsprogs zstd"
  if ! dpkg -s $want >/dev/null 2>&1; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $want
  fi
  # binfmt_misc (for the debootstrap second stage in a chroot through qemu-aarch64-static)
  [ -e /proc/sys/fs/binfmt_misc/register ] || mount -t binfmt_misc binfmt_misc /proc/sys/fs/binfmt_misc
  [ -e /proc/sys/fs/binfmt_misc/qemu-aarch64 ] || update-binfmts --enable qemu-aarch64
  qemu-system-aarch64 --version | head -1
}

# ---------------------------------------------------------------- aarch64 jobprof (cross build from a copy)
st_jobprof() {
  local b=$C/jobprof-src
  if [ ! -x "$b/target/aarch64-unknown-linux-gnu/release/jobprof-record" ]; then
    rustup target list --installed | grep -qx aarch64-unknown-linux-gnu || rustup target add aarch64-unknown-linux-gnu
    mkdir -p "$b"
    # a copy of the checkout (tracked + untracked files, no target/): the project checkout stays untouched
    (cd "$SRC" && tar --exclude=./target -cf - .) | (cd "$b" && tar -xf -)
    (cd "$b" && CARGO_TARGET_AARCH64_UNKNOWN_LINUX_GNU_LINKER=aarch64-linux-gnu-gcc \
      cargo build --release --locked --target aarch64-unknown-linux-gnu -p jobprof-record)
  fi
  file "$b/target/aarch64-unknown-linux-gnu/release/jobprof-record"
  (cd "$SRC" && git rev-parse HEAD) > "$C/jobprof-commit.txt"
}

# ---------------------------------------------------------------- Debian 12 arm64 rootfs
GUEST_PKGS=systemd-sysv,udev,kmod,initramfs-tools,linux-image-arm64,linux-perf,gcc,g++,libc6-dev,libc6-dbg,procps,zstd,binutils,file,elfutils
st_rootfs() {
  if [ ! -e "$ROOTFS/.stage1" ]; then
    rm -rf "$ROOTFS"; mkdir -p "$ROOTFS" "$C/debs"
    debootstrap --arch=arm64 --foreign --variant=minbase --include="$GUEST_PKGS" \
      --cache-dir="$C/debs" "$SUITE" "$ROOTFS" "$MIRROR"
    # No initramfs-tools initrd at all: mkinitramfs under qemu-user takes ~10 min on an idle
    # machine and over an hour on a loaded one (one modinfo per module); st_image builds a minimal
    # initrd on the host instead (the second stage runs with INITRD=No, which the kernel hook
    # honours; update_initramfs=no also skips later triggers; dpkg keeps this pre-existing
    # conffile: debootstrap configures with --force-confold)
    mkdir -p "$ROOTFS/etc/initramfs-tools"; echo update_initramfs=no > "$ROOTFS/etc/initramfs-tools/update-initramfs.conf"
    touch "$ROOTFS/.stage1"
  fi
  if [ ! -e "$ROOTFS/.stage2" ]; then
    # the binfmt entry (flags PF, no F) runs /usr/libexec/qemu-binfmt/aarch64-binfmt-P inside the chroot
    mkdir -p "$ROOTFS/usr/libexec/qemu-binfmt" "$ROOTFS/usr/bin"
    cp /usr/bin/qemu-aarch64-static "$ROOTFS/usr/bin/"
    ln -sf ../../bin/qemu-aarch64-static "$ROOTFS/usr/libexec/qemu-binfmt/aarch64-binfmt-P"
    if [ -e "$ROOTFS/.stage2-tried" ] && [ -e "$ROOTFS/debootstrap" ] && [ -e "$ROOTFS/var/lib/dpkg/status" ]; then
      # a second stage that died in its last steps (a trigger, disk full, a killed mkinitramfs):
      # finish dpkg's pending work, still without an initramfs-tools initrd
      sed -i 's/^update_initramfs=.*/update_initramfs=no/' "$ROOTFS/etc/initramfs-tools/update-initramfs.conf"
      chroot "$ROOTFS" env INITRD=No dpkg --force-confold --configure -a
      rm -f "$ROOTFS"/boot/initrd.img-*.new "$ROOTFS"/boot/initrd.img-*.dpkg-bak
      rm -rf "$ROOTFS/debootstrap"
    else
      touch "$ROOTFS/.stage2-tried"
      chroot "$ROOTFS" env INITRD=No /debootstrap/debootstrap --second-stage
    fi
    touch "$ROOTFS/.stage2"
  fi
  # the second stage mounts proc and sys in the chroot; never copy them (cp -a / mkfs -d of a live /proc fills the disk)
  for m in proc sys; do mountpoint -q "$ROOTFS/$m" && umount "$ROOTFS/$m"; done
  if [ ! -e "$ROOTFS/.configured" ]; then
    echo "deb $MIRROR $SUITE main" > "$ROOTFS/etc/apt/sources.list"
    echo arm64vm > "$ROOTFS/etc/hostname"
    printf '/dev/vda / ext4 rw,relatime 0 1\n' > "$ROOTFS/etc/fstab"
    chroot "$ROOTFS" passwd -d root >/dev/null
    # no update-initramfs here: st_image builds a minimal initrd on the host; 9p and 9pnet_virtio
    # load from / after boot
    # boot job: mount the host share, run its guest-run.sh, power off
    cat > "$ROOTFS/usr/local/sbin/guest-boot.sh" <<'EOF'
#!/bin/sh
mkdir -p /mnt/host
mount -t 9p -o trans=virtio,version=9p2000.L,msize=1048576 host0 /mnt/host || { echo "GUEST: 9p mount failed"; systemctl poweroff; exit 1; }
if [ -x /mnt/host/guest-run.sh ] && [ ! -e /mnt/host/no-run ]; then
  /mnt/host/guest-run.sh > /mnt/host/guest-run.log 2>&1; echo "GUEST: guest-run.sh rc=$?" | tee -a /mnt/host/guest-run.log
fi
sync; umount /mnt/host
[ -e /etc/no-poweroff ] || systemctl poweroff
EOF
    chmod +x "$ROOTFS/usr/local/sbin/guest-boot.sh"
    cat > "$ROOTFS/etc/systemd/system/guest-run.service" <<'EOF'
[Unit]
Description=run /mnt/host/guest-run.sh then power off
After=local-fs.target systemd-modules-load.service
[Service]
Type=oneshot
ExecStart=/usr/local/sbin/guest-boot.sh
StandardOutput=journal+console
StandardError=journal+console
TimeoutStartSec=infinity
[Install]
WantedBy=multi-user.target
EOF
    ln -sf /etc/systemd/system/guest-run.service "$ROOTFS/etc/systemd/system/multi-user.target.wants/guest-run.service"
    chroot "$ROOTFS" apt-get clean
    rm -f "$ROOTFS/usr/bin/qemu-aarch64-static" "$ROOTFS/usr/libexec/qemu-binfmt/aarch64-binfmt-P"
    touch "$ROOTFS/.configured"
  fi
  ls "$ROOTFS"/boot/
  chroot "$ROOTFS" /bin/true 2>/dev/null || true
  dpkg-query --admindir="$ROOTFS/var/lib/dpkg" -W linux-image-arm64 linux-perf gcc libc6 libc6-dbg 'linux-image-*-arm64' | tee "$C/guest-packages.txt"
}

# ---------------------------------------------------------------- ext4 image, kernel, initrd
st_image() {
  if [ ! -s "$IMG" ] || [ "$ROOTFS/.configured" -nt "$IMG" ]; then
    rm -f "$IMG"
    for m in proc sys; do ! mountpoint -q "$ROOTFS/$m" || { echo "$ROOTFS/$m is mounted"; return 1; }; done
    mkfs.ext4 -q -L root -d "$ROOTFS" "$IMG" "${IMG_SIZE:-3G}"
  fi
  cp -L "$ROOTFS/vmlinuz" "$C/vmlinuz"
  [ -s "$C/initrd.img" ] && [ "$C/initrd.img" -nt "$ROOTFS/.configured" ] || make_initrd "$C/initrd.img"
  ls -l "$IMG" "$C/vmlinuz" "$C/initrd.img"
}

# A minimal initrd made on the host: a static aarch64 /init that loads virtio-mmio, virtio-blk and
# ext4 (with its dependencies) and the 9p share's modules from the guest's, mounts /dev/vda and
# execs its /sbin/init.
make_initrd() {
  local out=$1 w=$C/initrd-build kv
  kv=$(basename "$(readlink -f "$ROOTFS/vmlinuz")"); kv=${kv#vmlinuz-}
  local M=$ROOTFS/lib/modules/$kv/kernel
  rm -rf "$w"; mkdir -p "$w"
  cp "$STEER/scripts/arm64-vm-init.c" "$w/init.c"
  aarch64-linux-gnu-gcc -static -O2 -o "$w/init" "$w/init.c"
  python3 "$STEER/scripts/arm64-vm-cpio.py" "$out" "init=$w/init" "m/crc16.ko=$M/lib/crc16.ko" \
    "m/crc32c_generic.ko=$M/crypto/crc32c_generic.ko" \
    "m/mbcache.ko=$M/fs/mbcache.ko" "m/jbd2.ko=$M/fs/jbd2/jbd2.ko" "m/ext4.ko=$M/fs/ext4/ext4.ko" \
    "m/virtio_mmio.ko=$M/drivers/virtio/virtio_mmio.ko" "m/virtio_blk.ko=$M/drivers/block/virtio_blk.ko" \
    "m/virtio_pci_legacy_dev.ko=$M/drivers/virtio/virtio_pci_legacy_dev.ko" \
    "m/virtio_pci_modern_dev.ko=$M/drivers/virtio/virtio_pci_modern_dev.ko" \
    "m/virtio_pci.ko=$M/drivers/virtio/virtio_pci.ko" "m/netfs.ko=$M/fs/netfs/netfs.ko" \
    "m/fscache.ko=$M/fs/fscache/fscache.ko" "m/9pnet.ko=$M/net/9p/9pnet.ko" \
    "m/9pnet_virtio.ko=$M/net/9p/9pnet_virtio.ko" "m/9p.ko=$M/fs/9p/9p.ko"
}

# ---------------------------------------------------------------- boot and run the guest script
st_boot() {
  set +e   # this stage reports failures instead of stopping at them
  local aj=$C/jobprof-src/target/aarch64-unknown-linux-gnu/release
  prep_share out
  if [ -x "$aj/jobprof-record" ]; then   # stripped copies (the release build keeps debug info)
    aarch64-linux-gnu-strip -o "$SHARE/jobprof-record" "$aj/jobprof-record"
  fi
  write_guest_run > "$SHARE/guest-run.sh"; chmod +x "$SHARE/guest-run.sh"
  run_guest 3000
  grep -E '^GUEST' "$SHARE/guest-run.log" || true
  ls -la "$SHARE/out"
  set -e
}

# prep_share OUT: an empty $SHARE/OUT for the guest's outputs and the worker's sources in $SHARE/src.
prep_share() {
  rm -rf "${SHARE:?}/$1"; mkdir -p "$SHARE/$1"
  rm -rf "$SHARE/src"; mkdir -p "$SHARE/src"; cp "$SRC/fixtures/src/arm64/worker.cpp" "$SRC/fixtures/src/arm64/libwork.c" "$SHARE/src/"
}

# run_guest SECS: boots the guest on a fresh copy of the image; it runs $SHARE/guest-run.sh and
# powers off (killed after SECS). The console goes to $C/console.log.
run_guest() {
  local img=$C/run.ext4
  cp --sparse=always "$IMG" "$img"       # a fresh disk per boot: every run starts from the same image
  timeout "$1" qemu-system-aarch64 -M virt -cpu max,pauth-impdef=on -smp 2 -m 2048 -nographic -no-reboot \
    -kernel "$C/vmlinuz" -initrd "$C/initrd.img" \
    -append 'root=/dev/vda rw console=ttyAMA0 systemd.show_status=1 quiet' \
    -drive file="$img",format=raw,if=none,id=hd0 -device virtio-blk-device,drive=hd0 \
    -virtfs local,path="$SHARE",mount_tag=host0,security_model=none,id=host0 \
    -nic none </dev/null 2>&1 | tee "$C/console.log" | grep --line-buffered -E 'GUEST|Kernel panic|Reached target|guest-run|Power' || true
}

# guest_prelude OUT: what every guest script starts with: its outputs go to $H/OUT ($O); the
# guest's versions, the fixture worker built from $H/src, the worker's start/stop/cue helpers and
# jr_capture.
guest_prelude() {
  printf '#!/bin/bash\n# Runs inside the Debian 12 arm64 guest, as root, from /mnt/host (9p share of the host).\n'
  printf 'set -u\nH=/mnt/host; O=$H/%s; W=/root/work\n' "$1"
  cat <<'EOF'
g() { echo "GUEST $(date +%T) $*"; }
T0=$(date +%s)
mkdir -p $O $W/bin
sysctl -w kernel.kptr_restrict=0 kernel.perf_event_paranoid=-1 >/dev/null
uname -a > $O/uname.txt; perf --version > $O/perf-version.txt; perf version --build-options > $O/perf-build-options.txt 2>&1
gcc --version | head -1 > $O/gcc-version.txt
dpkg-query -W linux-perf 'linux-image-*' libc6 libc6-dbg gcc-12 g++-12 > $O/guest-packages.txt
cat /proc/cpuinfo > $O/cpuinfo.txt
g "uname: $(uname -r), $(perf --version)"
# the worker: a C++ executable and its shared library (fixtures/src/arm64)
cp $H/src/worker.cpp $H/src/libwork.c $W/bin/
cd $W/bin
s=$(date +%s)
gcc -O1 -g -fno-omit-frame-pointer -fPIC -shared -o libwork.so libwork.c &&
  g++ -O1 -g -fno-omit-frame-pointer -pthread -o worker worker.cpp -L. -lwork -Wl,-rpath,'$ORIGIN'
g "build rc=$? took $(( $(date +%s) - s ))s"
cd $W
REGS=x0,x1,x2,x3,x4,x5,x6,x7,x8,x9,x10,x11,x12,x13,x14,x15,x16,x17,x18,x19,x20,x21,x22,x23,x24,x25,x26,x27,x28,x29,lr,sp,pc
start_worker() { rm -rf $W/ctl; mkdir -p $W/ctl; $W/bin/worker $W/ctl $1 & WPID=$!; sleep 0.5; }
stop_worker() { kill $WPID; wait $WPID 2>/dev/null; }
cue() { ( sleep $1; touch $W/ctl/b; sleep $1; touch $W/ctl/c ) & }
# jr_capture RECORDER NAME CALL_GRAPH SECS THREADS [cue [FREQ]]: query q01 of a worker of THREADS threads,
# recorded by RECORDER's sidecar at FREQ Hz (99) between the driver's start and stop (SECS apart) into the
# result dir $W/jr-NAME. Phase b from the start, or with `cue` phases a, b and c a third each.
jr_capture() {
  local JR=$1 n=$2 cg=$3 secs=$4 RD=$W/jr-$2 TOK=$W/tok-$2 s SPID
  rm -rf $RD $TOK; mkdir -p $RD/profiles/perf $TOK
  start_worker $5
  s=$(date +%s)
  $JR sidecar --token-dir $TOK --worker 0 --pid $WPID --out $RD/profiles/perf --frequency ${7:-99} --call-graph $cg > $O/jr-$n-sidecar.log 2>&1 & SPID=$!
  $JR start --token-dir $TOK --worker 0 --query q01 --timeout 300 >> $O/jr-$n-ctl.log 2>&1; g "jr $n start rc=$?"
  if [ "${6:-}" = cue ]; then cue $(( secs / 3 )); else touch $W/ctl/b; fi
  sleep $secs
  $JR stop --token-dir $TOK --worker 0 --query q01 --timeout 300 >> $O/jr-$n-ctl.log 2>&1; g "jr $n stop rc=$?"
  $JR shutdown --token-dir $TOK --worker 0 --timeout 300 >> $O/jr-$n-ctl.log 2>&1; g "jr $n shutdown rc=$?"
  wait $SPID; g "jr $n sidecar rc=$? took $(( $(date +%s) - s ))s"
  stop_worker
}
EOF
}

# The script the guest runs at boot (from the 9p share, so it can change without a new image).
write_guest_run() {
  guest_prelude out
  cat <<'EOF'
# 1. fp (-g): 2 threads, phases a, b, c one second each
start_worker 2; cue 1
perf record -e cpu-clock -F 499 -g -p $WPID -o $W/fp.perf.data -- sleep 3 > $O/fp.record.log 2>&1; g "fp record rc=$?"
stop_worker
# 2. dwarf,8192 with cpu-clock and the VG-free register mask: 1 thread, 99 Hz (small stack copies)
start_worker 1; cue 1
perf record -e cpu-clock -F 99 --call-graph dwarf,8192 --user-regs=$REGS -p $WPID -o $W/dwarf.perf.data -- sleep 3 > $O/dwarf.record.log 2>&1; g "dwarf record rc=$?"
stop_worker
# 3. perf's own mask with cpu-clock + dwarf (the register rule's reason: VG in the mask)
start_worker 1
perf record -e cpu-clock -F 99 --call-graph dwarf,8192 -p $WPID -o $W/vg.perf.data -- sleep 1 > $O/vg-default.record.log 2>&1; g "dwarf cpu-clock default mask rc=$?"
perf evlist -v -i $W/vg.perf.data > $O/vg-default.evlist.txt 2>&1
perf record -e cpu-clock -F 99 --call-graph dwarf,8192 --user-regs=$REGS -p $WPID -o $W/vg2.perf.data -- sleep 1 > $O/vg-regs.record.log 2>&1; g "dwarf cpu-clock --user-regs rc=$?"
perf evlist -v -i $W/vg2.perf.data > $O/vg-regs.evlist.txt 2>&1
stop_worker
# 4. ground truth and the files for off-node symbolization, one folder per capture
for k in fp dwarf; do
  F=$O/fx-$k; mkdir -p $F/symfs
  cp $W/$k.perf.data $F/perf.data
  perf script -i $W/$k.perf.data --no-inline > $F/perf-script.noinline.txt 2> $F/perf-script.noinline.err; g "perf script --no-inline $k rc=$?"
  perf script -i $W/$k.perf.data > $F/perf-script.inline.txt 2> $F/perf-script.inline.err; g "perf script $k rc=$?"
  perf buildid-list -i $W/$k.perf.data > $F/buildids.txt 2>&1
  perf evlist -v -i $W/$k.perf.data > $F/evlist.txt 2>&1
  perf report -i $W/$k.perf.data --header-only > $F/header.txt 2>&1
  cat /proc/kallsyms > $F/kallsyms
  awk '{print $2}' $F/buildids.txt | sort -u | while read -r p; do
    case "$p" in /*) [ -f "$p" ] && { mkdir -p $F/symfs$(dirname $p); cp -L $p $F/symfs$p; } ;; esac
  done
  # the vDSO as perf record saved it
  v=$(ls /root/.debug/\[vdso\]/*/vdso 2>/dev/null | head -1); [ -n "$v" ] && cp "$v" "$F/symfs/[vdso]"
  # separate debug info by build id (libc6-dbg: /usr/lib/debug/.build-id/xx/yyyy.debug)
  awk '{print $1}' $F/buildids.txt | sort -u | while read -r id; do
    d=/usr/lib/debug/.build-id/${id:0:2}/${id:2}.debug
    [ -f $d ] && { mkdir -p $F/symfs$(dirname $d); cp -L $d $F/symfs$d; }
  done
  find $F/symfs -type f | sort > $F/symfs-files.txt
done
# 5. jobprof-record end to end: fp and dwarf,8192 (its default event, cpu-clock: the register rule)
if [ -x $H/jobprof-record ]; then
  cp $H/jobprof-record /usr/local/bin/; JR=/usr/local/bin/jobprof-record
  for cg in fp dwarf,8192; do
    n=${cg%%,*}; RD=$W/jr-$n
    jr_capture $JR $n $cg 3 1
    for f in $RD/profiles/perf/worker_0/q01/perf.data*; do
      [ -f "$f" ] || continue
      perf script -i $f --no-inline > $O/jr-$n.$(basename $f).perf-script.noinline.txt 2> $O/jr-$n.$(basename $f).perf-script.err
      perf evlist -v -i $f > $O/jr-$n.$(basename $f).evlist.txt 2>&1
    done
    tar -C $W -cf $O/jr-$n.tar jr-$n
  done
fi
g "done in $(( $(date +%s) - T0 ))s"
EOF
}

# ---------------------------------------------------------------- copy the guest's outputs out
# $OUTD gets the guest's out/ as is (fx-fp/, fx-dwarf/: perf.data, symfs/, kallsyms, the guest's perf
# script text; jr-*.tar: jobprof-record's result dirs; logs). fixtures/make-arm64-fixtures.sh packs fixtures from it.
st_collect() {
  local o=$SHARE/out
  [ -s "$o/fx-fp/perf.data" ] || { echo "no guest outputs in $o"; return 1; }
  rm -rf "$OUTD"; mkdir -p "$OUTD"; cp -a "$o/." "$OUTD/"
  cp "$C/guest-packages.txt" "$C/jobprof-commit.txt" "$OUTD/" 2>/dev/null || true
  du -sh "$OUTD"; ls -la "$OUTD"
}

# ---------------------------------------------------------------- the release tarball in the guest
# $OUTD/release/ gets the guest's release-out/: the tarball's versions and demo run, preflight-*.txt,
# process-*.log and *.summary.json of its own captures, bench-*.txt (one line per timed run: label,
# wall s, user s, sys s, rc), the folded stacks of each kind of run, and ratios.txt.
st_release() {
  local tb=${TARBALL:-} o=$SHARE/release-out
  [ -n "$tb" ] || tb=$(ls -t "$SRC"/dist/jobprof-*-aarch64-linux.tar.gz 2>/dev/null | head -1)
  [ -s "$tb" ] || { echo "no aarch64 release tarball: scripts/release.sh --target aarch64-unknown-linux-gnu"; return 1; }
  set +e   # from here on the stage reports failures instead of stopping at them
  prep_share release-out
  rm -rf "$SHARE/release"; mkdir -p "$SHARE/release"; cp "$tb" "$SHARE/release/"
  # PROFILE=1: the unstripped jobprof of the same build, for a profile of native in the guest
  if [ "${PROFILE:-0}" = 1 ]; then cp "$SRC/target/aarch64-unknown-linux-gnu/release/jobprof" "$SHARE/release/jobprof.debug"; fi
  write_guest_release "$(basename "$tb")" > "$SHARE/guest-run.sh"; chmod +x "$SHARE/guest-run.sh"
  run_guest "${RELEASE_TIMEOUT:-3000}"
  grep -E '^GUEST' "$SHARE/guest-run.log" || true
  rm -rf "$OUTD/release"; mkdir -p "$OUTD/release"; cp -a "$o/." "$SHARE/guest-run.log" "$OUTD/release/"
  cat "$OUTD/release/ratios.txt"
  set -e
}

# The guest script of st_release. Knobs (host environment): RUNS (3) timed runs of each kind,
# BIG_SECS (25), BIG_THREADS (2), BIG_FREQ (99 Hz) and BIG_STACK (perf's default dwarf stack copy,
# 8192 bytes; e.g. 16384) for the larger dwarf capture, INLINE_RUNS (1) runs of perf
# script --inline of each kind, INLINE_LIMIT (600) seconds each; PROFILE=1 (st_release) adds a
# perf profile of one native run (profile-native.txt).
write_guest_release() {
  guest_prelude release-out
  printf 'TB=%q RUNS=%d BIG_SECS=%d BIG_THREADS=%d BIG_FREQ=%d BIG_CG=%q INLINE_RUNS=%d INLINE_LIMIT=%d\n' "$1" \
    "${RUNS:-3}" "${BIG_SECS:-25}" "${BIG_THREADS:-2}" "${BIG_FREQ:-99}" "dwarf${BIG_STACK:+,$BIG_STACK}" \
    "${INLINE_RUNS:-1}" "${INLINE_LIMIT:-600}"
  cat <<'EOF'
R=/root/rel; rm -rf $R; mkdir -p $R
tar -xzf $H/release/$TB -C $R; D=$(echo $R/jobprof-*-linux); JP=$D/bin/jobprof; JR=$D/bin/jobprof-record
{ $JP --version; $JR --version; file $JP $JR; } > $O/release-versions.txt 2>&1
g "tarball $TB: $(head -2 $O/release-versions.txt | tr '\n' ' ')"
# the tarball's own self-test (scripts/release.sh): the demo, nothing but its bin/ on PATH
( cd $R && PATH=$D/bin jobprof process --quiet $D/demo/result_dir_demo ) > $O/demo.log 2>&1; g "demo process rc=$?"
# preflight with the default options, and with dwarf (the VG-free register rule)
start_worker 1
$JR preflight --pid $WPID > $O/preflight-default.txt 2>&1; g "preflight rc=$?"
$JR preflight --pid $WPID --call-graph dwarf > $O/preflight-dwarf.txt 2>&1; g "preflight --call-graph dwarf rc=$?"
stop_worker
grep -i 'regs' $O/preflight-*.txt
# the tarball's recorder on the worker, the tarball's jobprof process on its captures
cap() { echo $W/jr-$1/profiles/perf/worker_0/q01; }
jr_capture $JR fp fp 3 1
jr_capture $JR dwarf dwarf 3 1
for n in fp dwarf; do
  $JP process $W/jr-$n > $O/process-$n.log 2>&1; g "process $n rc=$?: $(grep -m1 processed $O/process-$n.log)"
  cp $(cap $n)/summary.json $O/process-$n.summary.json
done
# tm NAME LABEL CMD...: CMD under bash's time (CPU includes children: perf script under jobprof);
# appends "LABEL wall user sys rc" to $O/bench-NAME.txt
tm() {
  local n=$1 l=$2 t rc TIMEFORMAT='%R %U %S'; shift 2
  t=$( { time "$@" > /dev/null 2>> $O/bench-$n.err; } 2>&1 ); rc=$?
  echo "$l $t $rc" | tee -a $O/bench-$n.txt
  return $rc
}
# keep NAME LABEL: the folded stacks, summary.json (its timings: native's phases) and the
# symbolizer of the last (successful) run
keep() {
  cp $(cap $1)/stacks.folded $O/$1.$2.folded; cp $(cap $1)/summary.json $O/$1.$2.summary.json
  echo "$2 $(grep -o '"symbolized_from": "[^"]*"' $(cap $1)/summary.json | cut -d'"' -f4)" >> $O/bench-$1.from.txt
}
# perf_shards CAPTURE FLAG: the guest's perf script on each shard, one after the other, with the
# capture's symfs and kallsyms as jobprof passes them
perf_shards() {
  local f d sy=()
  for d in $1 $1/..; do
    [ -d $d/symfs ] && { sy=(--symfs $d/symfs); [ -f $d/kallsyms ] && sy+=(--kallsyms $d/kallsyms); break; }
  done
  for f in $1/perf.data*; do perf script -f -i $f "${sy[@]}" $2 > /dev/null || return; done
}
# bench NAME: jobprof process with each symbolizer and perf script per shard, RUNS times each
bench() {
  local n=$1 rd=$W/jr-$1 c i
  c=$(cap $n); rm -f $O/bench-$n.txt $O/bench-$n.from.txt
  echo "$n: $(ls $c/perf.data* | wc -l) shards, $(du -cb $c/perf.data* | tail -1 | cut -f1) bytes, $(grep -m1 -o '"samples": [0-9]*' $c/summary.json)" | tee $O/bench-$n.capture.txt
  for i in $(seq $RUNS); do
    tm $n native $JP process --force --quiet --symbolizer native $rd && keep $n native
    tm $n native-noinline $JP process --force --quiet --symbolizer native --no-inline $rd && keep $n native-noinline
    tm $n perf $JP process --force --quiet --symbolizer perf $rd && keep $n perf
    tm $n script-noinline perf_shards $c --no-inline
    # only stacks.folded (and the archive): no input hashes, no rendering
    tm $n native-folded $JP process --force --quiet --symbolizer native --no-inline --formats folded $rd
    tm $n perf-folded $JP process --force --quiet --symbolizer perf --formats folded $rd
  done
}
# bench_inline NAME: perf script --inline (the slow one, under INLINE_LIMIT), through jobprof and
# per shard, INLINE_RUNS times each
bench_inline() {
  local n=$1 rd=$W/jr-$1 c i
  c=$(cap $n)
  for i in $(seq $INLINE_RUNS); do
    tm $n perf-inline timeout $INLINE_LIMIT $JP process --force --quiet --symbolizer perf --inline $rd && keep $n perf-inline
    tm $n script-inline timeout $INLINE_LIMIT bash -c "$(declare -f perf_shards); perf_shards $c --inline"
  done
}
# agree NAME A B: the share of A's sample weight on stacks B has with at least that weight
agree() {
  awk '{ n = $NF; k = substr($0, 1, length($0) - length(n) - 1) }
    NR == FNR { ref[k] += n; next } { ours += n; same += (n < ref[k] ? n : ref[k]) }
    END { printf "%.2f%%", ours ? 100 * same / ours : 0 }' $O/$1.$3.folded $O/$1.$2.folded
}
# ratios NAME: best wall and CPU of each label and the ratios of perf script to native
ratios() {
  awk -v n=$1 '$5 == 0 { w = $2; c = $3 + $4
      if (!($1 in bw) || w < bw[$1]) bw[$1] = w; if (!($1 in bc) || c < bc[$1]) bc[$1] = c }
    END { for (l in bw) printf "%s %s: best wall %.2f s, best CPU %.2f s\n", n, l, bw[l], bc[l]
      r("perf", "native"); r("perf", "native-noinline"); r("script-noinline", "native-noinline")
      r("perf-folded", "native-folded"); r("script-noinline", "native-folded")
      r("perf-inline", "native"); r("script-inline", "native") }
    function r(a, b) { if ((a in bw) && (b in bw) && bw[b] > 0 && bc[b] > 0)
      printf "%s ratio %s / %s: wall %.2fx, CPU %.2fx\n", n, a, b, bw[a] / bw[b], bc[a] / bc[b] }' $O/bench-$1.txt
  echo "$1 agreement native-noinline on perf: $(agree $1 native-noinline perf), native on perf-inline: $(agree $1 native perf-inline)"
}
bench dwarf; ratios dwarf | tee $O/ratios.txt
# the larger dwarf capture: BIG_SECS seconds of BIG_THREADS threads at BIG_FREQ Hz, phases a, b, c
df -h $W > $O/df-before-big.txt
jr_capture $JR big $BIG_CG $BIG_SECS $BIG_THREADS cue $BIG_FREQ
df -h $W > $O/df-after-big.txt
$JP process $W/jr-big > $O/process-big.log 2>&1; g "process big rc=$?: $(grep -m1 processed $O/process-big.log)"
bench big; ratios big | tee -a $O/ratios.txt
# where native's time goes: a flat profile of one run of the unstripped build (when given)
if [ -s $H/release/jobprof.debug ]; then
  cp $H/release/jobprof.debug $W/jobprof.debug
  perf record -F 999 -o $W/prof.data -- $W/jobprof.debug process --force --quiet --symbolizer native $W/jr-big > $O/profile-native.log 2>&1
  perf report -i $W/prof.data --stdio --no-children --sort dso,sym --percent-limit 0.5 > $O/profile-native.txt 2>> $O/profile-native.log
  g "profile of native rc=$?: $(grep -c '%' $O/profile-native.txt) lines"
fi
# then with inline frames on both sides
bench_inline dwarf; bench_inline big
{ ratios dwarf; ratios big; } | tee $O/ratios.txt
g "done in $(( $(date +%s) - T0 ))s"
EOF
}

# main in a function: bash parses it whole before running it, so editing this file while it runs is safe
main() {
  trap 'echo "[arm64-vm] FAILED at line $LINENO: $BASH_COMMAND" >&2' ERR
  local STAGES=("$@") s; [ ${#STAGES[@]} -gt 0 ] || STAGES=(host jobprof rootfs image boot collect)
  for s in "${STAGES[@]}"; do t "stage $s"; timed "st_$s"; done
  t "all done"
}
main "$@"; exit $?
