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
