#!/bin/sh
# fracgpu-install-vgpu SOURCE DEST_DIR
# The device-plugin DaemonSet's init container (deploy/device-plugin.yaml): installs libvgpu.so
# from the image into DEST_DIR (the host's <hook-path>/vgpu, mounted at the same path in GPU
# containers) and writes DEST_DIR/ld.so.preload naming it, the file the device plugin mounts
# at /etc/ld.so.preload (docs/device-plugin.md "Allocate").
# A changed library is written to a temporary file and renamed over the old one, so running
# containers that have the old copy mapped keep it intact. Idempotent.
set -eu
if [ "$#" -ne 2 ]; then
  echo "usage: fracgpu-install-vgpu SOURCE DEST_DIR" >&2
  exit 2
fi
src=$1
dest=$2
if [ ! -f "$src" ]; then
  echo "fracgpu-install-vgpu: $src does not exist" >&2
  exit 1
fi
mkdir -p "$dest"
if cmp -s "$src" "$dest/libvgpu.so"; then
  echo "fracgpu-install-vgpu: $dest/libvgpu.so is up to date"
else
  cp "$src" "$dest/.libvgpu.so.tmp"
  chmod 0755 "$dest/.libvgpu.so.tmp"
  mv -f "$dest/.libvgpu.so.tmp" "$dest/libvgpu.so"
  echo "fracgpu-install-vgpu: installed $dest/libvgpu.so"
fi
printf '%s\n' "$dest/libvgpu.so" > "$dest/.ld.so.preload.tmp"
chmod 0644 "$dest/.ld.so.preload.tmp"
mv -f "$dest/.ld.so.preload.tmp" "$dest/ld.so.preload"
