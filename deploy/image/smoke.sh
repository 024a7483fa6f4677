#!/usr/bin/env bash
# Builds an image FROM scratch holding a meshdns binary and exactly the shared libraries it
# loads (the ones distroless/cc-debian12 provides), then runs `meshdns --version` and a DNS
# query inside it as UID 65532 on a read-only root filesystem — what can be verified here of the Dockerfile's runtime stage,
# since base images cannot be pulled on this machine (docs/deploy.md).
#
#   deploy/image/smoke.sh target/debug/meshdns
#
# Needs podman (Debian's), dig, and root. Where `podman run` cannot start a container (a
# sandbox without cgroups or setrlimit), the image's root filesystem is run with chroot
# instead, and the script says so.
set -euo pipefail
bin=$(realpath "${1:?usage: smoke.sh BINARY}")
work=$(mktemp -d)
trap 'podman --storage-driver vfs image rm -f localhost/meshdns-smoke >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
export CONTAINERS_CONF="$work/containers.conf"
# No default rlimits: a sandbox may refuse setrlimit even to the current values.
printf '[containers]\ndefault_ulimits = []\n' >"$CONTAINERS_CONF"
podman="podman --storage-driver vfs"

# The root filesystem: the binary, the libraries the loader resolves for it, a passwd entry.
root="$work/ctx/rootfs"
mkdir -p "$root/usr/local/bin" "$root/etc/meshdns" "$root/tmp"
cp "$bin" "$root/usr/local/bin/meshdns"
for lib in $(ldd "$bin" | grep -o '/[^ ]*'); do
  mkdir -p "$root$(dirname "$lib")"
  cp -L "$lib" "$root$lib"
done
echo "nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin" >"$root/etc/passwd"
echo "nonroot:x:65532:" >"$root/etc/group"
cat >"$root/etc/meshdns/records.json" <<'JSON'
{"version": "v1alpha1", "ip4": {"smoke.ts.net": ["100.100.1.2"]}}
JSON
cat >"$work/ctx/Containerfile" <<'CF'
FROM scratch
COPY rootfs/ /
USER 65532:65532
ENTRYPOINT ["/usr/local/bin/meshdns"]
CF
$podman build -q -t localhost/meshdns-smoke "$work/ctx" >/dev/null
echo "image built FROM scratch with: $(cd "$root" && find . -name '*.so*' | sort | tr '\n' ' ')"

port=$((20000 + RANDOM % 20000))
if version=$($podman run --rm --network host localhost/meshdns-smoke --version 2>"$work/run.err"); then
  # `run` is only called in subshells ($(…) and &): exec makes $! the server itself.
  run() { exec $podman run --rm --read-only --network host localhost/meshdns-smoke "$@"; }
  how="podman run"
else
  echo "podman run cannot start containers here: $(tail -1 "$work/run.err")"
  mnt=$($podman image mount localhost/meshdns-smoke)
  # A private mount namespace with the image's root remounted read-only, as the manifests'
  # readOnlyRootFilesystem makes it.
  run() {
    exec unshare -m sh -c 'mount --bind "$0" "$0" && mount -o remount,bind,ro "$0" &&
      exec chroot --userspec 65532:65532 "$0" /usr/local/bin/meshdns "$@"' "$mnt" "$@"
  }
  version=$(run --version)
  how="chroot into the image's root filesystem, read-only"
fi
echo "$how: $version"
case "$version" in meshdns\ *\ \(*\)) ;; *) echo "unexpected --version: $version" >&2; exit 1 ;; esac

run serve --records /etc/meshdns/records.json --listen "127.0.0.1:$port" >"$work/serve.log" 2>&1 &
pid=$!
answer=""
for _ in $(seq 1 50); do
  answer=$(dig +short +time=1 +tries=1 @127.0.0.1 -p "$port" smoke.ts.net A 2>/dev/null || true)
  [ "$answer" = "100.100.1.2" ] && break
  sleep 0.2
done
kill "$pid" 2>/dev/null || true
wait "$pid" 2>/dev/null || true
if [ "$answer" != "100.100.1.2" ]; then
  echo "no answer from meshdns in the image; its log:" >&2
  cat "$work/serve.log" >&2
  exit 1
fi
echo "$how: dig smoke.ts.net A -> $answer (served as UID 65532)"
