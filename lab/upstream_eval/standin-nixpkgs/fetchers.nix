# Stand-ins for nixpkgs' fetchers (evaluation only). Each is a real fixed-output derivation whose output
# path is what nixpkgs' would be: Nix computes a fixed output's path from the hash, its mode (flat for
# fetchurl, recursive for unpacked sources) and the name alone, so these agree with
# pkgs/build-support/fetchurl/default.nix (name = the URL's last component unless given, flat, netrc
# hooks in the environment), fetchzip + fetchFromGitHub (name "source", recursive),
# pkgs/build-support/fetchgit (recursive) and rust/import-cargo-lock.nix (per-crate fetches, the
# outputHashes checks: a missing hash or one naming no git dependency throws).
{
  lib,
  stdenv,
  trivial,
}:
let
  inherit (stdenv) mkDerivation;

  fixedOutput =
    {
      name,
      hash ? "",
      sha256 ? "",
      recursive ? false,
      passthru ? { },
      env ? { },
    }:
    mkDerivation (
      env
      // {
        inherit name passthru;
        outputHashMode = if recursive then "recursive" else "flat";
        outputHashAlgo = if hash != "" then null else "sha256";
        outputHash =
          if hash != "" then
            hash
          else if sha256 != "" then
            sha256
          else
            throw "stand-in fetcher ${name}: no hash (nixpkgs would accept an empty hash and trust the first download)";
      }
    );

  fetchurl =
    {
      url ? null,
      urls ? [ ],
      name ? null,
      hash ? "",
      sha256 ? "",
      recursiveHash ? false,
      netrcPhase ? null,
      netrcImpureEnvVars ? [ ],
      postFetch ? "",
      passthru ? { },
      meta ? { },
      ...
    }:
    let
      allUrls = if url != null then [ url ] else urls;
    in
    fixedOutput {
      name = if name != null then name else baseNameOf (builtins.head allUrls);
      inherit hash sha256 passthru;
      recursive = recursiveHash;
      env = {
        urls = allUrls;
        inherit postFetch;
        impureEnvVars = [
          "http_proxy"
          "https_proxy"
        ]
        ++ netrcImpureEnvVars;
      }
      // lib.optionalAttrs (netrcPhase != null) { inherit netrcPhase; };
    };

  fetchFromGitHub =
    {
      owner,
      repo,
      rev ? null,
      tag ? null,
      name ? "source",
      hash ? "",
      sha256 ? "",
      ...
    }:
    let
      ref = if tag != null then "refs/tags/${tag}" else rev;
    in
    fixedOutput {
      inherit name hash sha256;
      recursive = true;
      passthru = {
        inherit owner repo tag;
        rev = if rev != null then rev else tag;
      };
      env.urls = [ "https://github.com/${owner}/${repo}/archive/${ref}.tar.gz" ];
    };

  fetchgit =
    {
      url,
      rev,
      hash ? "",
      sha256 ? "",
      name ? "${baseNameOf (lib.removeSuffix ".git" url)}-${builtins.substring 0 7 rev}",
      ...
    }:
    fixedOutput {
      inherit name hash sha256;
      recursive = true;
      passthru = { inherit url rev; };
      env = { inherit url rev; };
    };

  fetchpatch2 =
    {
      url,
      hash ? "",
      sha256 ? "",
      name ? baseNameOf url,
      ...
    }:
    fixedOutput {
      inherit name hash sha256;
      env.urls = [ url ];
    };

  # rust/import-cargo-lock.nix: one fetch per third-party crate, git sources need an outputHashes
  # entry keyed name-version, and a key naming no git dependency of the lock throws.
  importCargoLock =
    {
      lockFile ? null,
      lockFileContents ? null,
      outputHashes ? { },
      allowBuiltinFetchGit ? false,
      extraRegistries ? { },
    }:
    assert (lockFile == null) != (lockFileContents == null);
    let
      text = if lockFile != null then builtins.readFile lockFile else lockFileContents;
      parsed = builtins.fromTOML text;
      deps = builtins.filter (p: p ? source) (parsed.package or [ ]);
      parseGit = src: builtins.match "git\\+([^?]+)(\\?(rev|tag|branch)=(.*))?#(.*)" src;
      gitShas = builtins.listToAttrs (
        map (p: {
          name = "${p.name}-${p.version}";
          value = builtins.elemAt (parseGit p.source) 4;
        }) (builtins.filter (p: lib.hasPrefix "git+" p.source) deps)
      );
      shaHash = lib.mapAttrs' (
        nameVer: hash:
        lib.nameValuePair (
          gitShas.${nameVer} or (throw "A hash was specified for ${nameVer}, but there is no corresponding git dependency.")
        ) hash
      ) outputHashes;
      crate =
        p:
        let
          git = parseGit p.source;
        in
        if lib.hasPrefix "registry+" p.source then
          fetchurl {
            name = "crate-${p.name}-${p.version}.tar.gz";
            url = "https://static.crates.io/crates/${p.name}/${p.version}/download";
            sha256 = p.checksum or parsed.metadata."checksum ${p.name} ${p.version} (${p.source})";
          }
        else if git != null then
          let
            sha = builtins.elemAt git 4;
          in
          fetchgit {
            url = builtins.elemAt git 0;
            rev = sha;
            sha256 =
              shaHash.${sha}
                or (throw "No hash was found while vendoring the git dependency ${p.name}-${p.version}. You can add a hash through the `outputHashes` argument of `importCargoLock`");
          }
        else
          throw "Cannot handle crate source: ${p.source}";
      crates = builtins.deepSeq shaHash (map crate deps);
    in
    trivial.runCommand "cargo-vendor-dir" (
      {
        __structuredAttrs = true;
        inherit crates;
      }
      // (
        if lockFile == null then
          { inherit lockFileContents; }
        else
          {
            # nixpkgs links it into the vendor directory: the lock file is an input.
            cargoLock = lockFile;
            passthru.lockFile = lockFile;
          }
      )
    ) "link every crate into $out and write $out/.cargo/config.toml";
in
{
  inherit
    fetchurl
    fetchFromGitHub
    fetchgit
    fetchpatch2
    importCargoLock
    ;
  # pkgs/build-support/fetchzip: recursive hash of the unpacked archive.
  fetchzip =
    {
      url,
      name ? "source",
      hash ? "",
      sha256 ? "",
      ...
    }:
    fixedOutput {
      inherit name hash sha256;
      recursive = true;
      env.urls = [ url ];
    };
}
