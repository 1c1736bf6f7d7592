#!/usr/bin/env bash
# Prints the path of a `nix` command of Debian trixie's nix-bin (Nix 2.26), downloading and unpacking it
# first when needed: for machines whose own Nix is too old for nixpkgs' current lib (Debian bookworm's
# nix-bin is 2.8). The packages come from deb.debian.org through apt's own client with a private
# source list and cache (nothing is installed); they are unpacked with dpkg -x and run through trixie's
# loader, since their glibc is newer than the host's.
#
#   bash lab/upstream_eval/trixie-nix.sh [DIR]     # DIR default: $XDG_CACHE_HOME/bitexact/nix-trixie
set -euo pipefail

dest=${1:-${XDG_CACHE_HOME:-$HOME/.cache}/bitexact/nix-trixie}
if [ -x "$dest/nix" ] && "$dest/nix" --version >/dev/null 2>&1; then
  echo "$dest/nix"
  exit 0
fi
mkdir -p "$dest/apt/lists/partial" "$dest/apt/cache/archives/partial" "$dest/debs"
echo "deb http://deb.debian.org/debian trixie main" > "$dest/apt/sources.list"
opts=(
  -o "Dir::Etc::SourceList=$dest/apt/sources.list"
  -o "Dir::Etc::SourceParts=/dev/null"
  -o "Dir::State::Lists=$dest/apt/lists"
  -o "Dir::Cache=$dest/apt/cache"
)
echo "trixie-nix: apt-get update (trixie main, private lists)" >&2
apt-get "${opts[@]}" update -qq >&2
# nix-bin and the shared libraries it links (perl, PAM and debconf are for other binaries).
packages=$(apt-cache "${opts[@]}" depends --recurse --no-recommends --no-suggests --no-conflicts \
  --no-breaks --no-replaces --no-enhances nix-bin \
  | grep -E '^(lib|nix-bin)' | grep -vE 'perl|pam|semanage|debconf|debian-installer|newt|sasl2-modules' | sort -u)
echo "trixie-nix: downloading $(echo "$packages" | wc -w) packages" >&2
(cd "$dest/debs" && apt-get "${opts[@]}" download $packages >&2)
rm -rf "$dest/root"
for deb in "$dest"/debs/*.deb; do dpkg -x "$deb" "$dest/root"; done
cat > "$dest/nix" <<WRAPPER
#!/bin/sh
exec "$dest/root/usr/lib64/ld-linux-x86-64.so.2" --library-path "$dest/root/usr/lib/x86_64-linux-gnu" \\
  "$dest/root/usr/bin/nix" "\$@"
WRAPPER
chmod +x "$dest/nix"
"$dest/nix" --version >&2
echo "$dest/nix"
