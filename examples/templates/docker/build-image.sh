# Builds the workspace image from this machine, since no image can be pulled here: a small root
# file system with a shell, coreutils and a few tools, each with the shared libraries it needs
# (found with ldd), plus those of the server's node binary (node itself and the Tether checkout
# are mounted read-only when the container runs). `docker import` turns it into $IMAGE.
# Skipped when $IMAGE exists; remove the image to rebuild it.
set -eu
if docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "image $IMAGE exists"
  exit 0
fi
root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
# Merged /usr, as on Debian: /bin, /lib, /lib64 and /sbin point into /usr.
mkdir -p "$root/usr/bin" "$root/usr/lib" "$root/usr/lib64" "$root/usr/sbin" "$root/usr/local/bin"
ln -s usr/bin "$root/bin"
ln -s usr/lib "$root/lib"
ln -s usr/lib64 "$root/lib64"
ln -s usr/sbin "$root/sbin"
copy() {
  mkdir -p "$root$(dirname "$1")"
  [ -e "$root$1" ] || cp -L "$1" "$root$1"
}
with_libs() {
  copy "$1"
  for lib in $(ldd "$1" 2>/dev/null | grep -o '/[^ ]*'); do copy "$lib"; done
}
for tool in sh bash env ls cat echo cp mv rm mkdir rmdir ln touch chmod chown pwd head tail \
  wc sort uniq tr cut tee sleep date id uname dirname basename readlink realpath stat du df \
  grep sed find xargs ps kill which true false test expr seq md5sum sha256sum diff tar gzip; do
  path=$(command -v "$tool" 2>/dev/null) || continue
  case "$path" in /*) with_libs "$path" ;; esac
done
# node is mounted at run time; its libraries must be in the image.
node=$(readlink -f "$(command -v node)")
for lib in $(ldd "$node" | grep -o '/[^ ]*'); do copy "$lib"; done
mkdir -p "$root/tmp" "$root/home/workspace" "$root/etc" "$root/proc" "$root/sys" "$root/dev" "$root/root"
chmod 1777 "$root/tmp"
echo 'root:x:0:0:root:/root:/bin/sh' >"$root/etc/passwd"
echo 'root:x:0:' >"$root/etc/group"
tar -C "$root" -c . | docker import \
  -c 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin' \
  -c 'ENV HOME=/home/workspace' \
  -c 'WORKDIR /home/workspace' \
  - "$IMAGE"
echo "built image $IMAGE"
