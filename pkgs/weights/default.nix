# The recipe's Hugging Face weights: one fixed-output derivation per manifest file (the hash is the
# LFS oid the lock tool read from the Hub), laid out as a hub cache in which `--model-path <org>/<name>`
# resolves offline. The logic (URLs, hashes, layout) is nix/lib/hf-cache.nix; this file only calls
# nixpkgs.
#
# Manifests live in ./manifests/<org>--<name>.json and are written by `nix run .#lock`; while one is
# absent, evaluating anything here throws one line naming that command.
#
# Gated repos: set HF_TOKEN in the environment of the process that runs the fetch (the nix daemon on
# a multi-user install). fetchurl reads it through netrcImpureEnvVars into a netrc file inside the
# build directory; it never enters a derivation or the store, and curl sends it to huggingface.co only
# (not to the CDN the download redirects to).
{
  lib,
  fetchurl,
  runCommandLocal,
  writeText,
  writeShellApplication,
  # The parsed recipe (nix/recipes/*.json); its model and drafter name the repos and revisions.
  recipe,
  manifestsDir ? ./manifests,
  repos ? [
    recipe.model
    recipe.drafter
  ],
}:
let
  hf = import ../../nix/lib/hf-cache.nix;

  manifests = map (
    r:
    hf.readManifest {
      inherit manifestsDir;
      inherit (r) repo revision;
    }
  ) repos;

  fetchOne =
    spec:
    fetchurl (
      {
        inherit (spec) name url;
        netrcImpureEnvVars = [ "HF_TOKEN" ];
        netrcPhase = ''
          if [ -n "''${HF_TOKEN:-}" ]; then
            printf 'machine huggingface.co login hf password %s\n' "$HF_TOKEN" > netrc
          else
            : > netrc
          fi
        '';
        passthru = { inherit (spec) repo path size; };
      }
      // builtins.intersectAttrs {
        sha256 = null;
        hash = null;
      } spec
    );

  # repo -> path -> the file's store path.
  files = builtins.listToAttrs (
    map (m: {
      name = m.repo;
      value = builtins.listToAttrs (
        map (spec: {
          name = spec.path;
          value = fetchOne spec;
        }) (hf.fetchSpecs m)
      );
    }) manifests
  );

  layout = hf.cacheLayout manifests;

  # A fetched file's store path as plain text (no dependency on its fixed-output derivation).
  expectedPath = link: builtins.unsafeDiscardStringContext "${files.${link.repo}.${link.path}}";

  # `nix run .#seed-weights -- HUB_CACHE`: add the files of an existing HF hub cache to the store under
  # the names and hashes fetchurl expects, so nothing is downloaded. nix-store --add-fixed refuses a
  # symlink (the hub cache's snapshots are links into blobs/), so each file is hard-linked (or copied
  # when the cache is on another filesystem) under its store name first. The store checks the hash:
  # a file that differs from the manifest lands at another path, which the script reports.
  # The expected paths are data, not inputs: their string context is dropped, so that running the
  # script downloads nothing (with the fetches as inputs, Nix would download every file before it
  # starts, and a gated repo without a token would fail). Each path is still the fetch's own outPath.
  seed = writeShellApplication {
    name = "seed-weights";
    text = ''
      # File paths are passed single-quoted on purpose (a `$` in one is part of the name).
      # shellcheck disable=SC2016
      if [ $# -ne 1 ] || [ ! -d "$1" ]; then
        echo "usage: seed-weights HUB_CACHE (the directory holding models--<org>--<name>/)" >&2
        exit 2
      fi
      cache=$1
      staging=$(mktemp -d "$cache/.seed-weights.XXXXXX")
      trap 'rm -rf "$staging"' EXIT
      failed=0
      seed() {
        local name=$1 target=$2 expected=$3 real got
        if [ -e "$expected" ]; then echo "present: $expected"; return; fi
        if [ ! -e "$cache/$target" ]; then echo "missing in the cache: $target" >&2; failed=1; return; fi
        real=$(readlink -f "$cache/$target")
        ln -f "$real" "$staging/$name" 2>/dev/null || cp "$real" "$staging/$name"
        got=$(nix-store --add-fixed sha256 "$staging/$name")
        rm -f "$staging/$name"
        if [ "$got" != "$expected" ]; then
          echo "differs from the manifest: $target (added as $got, expected $expected)" >&2
          failed=1
        else
          echo "added: $got"
        fi
      }
      ${lib.concatMapStrings (link: ''
        seed ${lib.escapeShellArg link.name} ${lib.escapeShellArg link.target} ${expectedPath link}
      '') layout.links}
      exit "$failed"
    '';
  };

  # What the image's preflight checks at start (every file with its size, per repo and revision).
  completeness = writeText "hf-weights-completeness.json" (builtins.toJSON (hf.completenessSpec manifests));
in
runCommandLocal "hf-hub-cache"
  {
    passthru = {
      inherit
        manifests
        files
        completeness
        layout
        seed
        ;
      totalBytes = hf.totalBytes manifests;
    };
  }
  ''
    mkdir -p "$out"
    ${lib.concatMapStrings (link: ''
      mkdir -p "$(dirname "$out/"${lib.escapeShellArg link.target})"
      ln -s ${files.${link.repo}.${link.path}} "$out/"${lib.escapeShellArg link.target}
    '') layout.links}
    ${lib.concatMapStrings (text: ''
      mkdir -p "$(dirname "$out/"${lib.escapeShellArg text.target})"
      # huggingface_hub reads refs verbatim: no trailing newline.
      printf '%s' ${lib.escapeShellArg text.text} > "$out/"${lib.escapeShellArg text.target}
    '') layout.texts}
  ''
