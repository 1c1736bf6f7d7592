# Stand-in for nixpkgs' stdenv (evaluation only, lab/upstream_eval): `mkDerivation` with the argument
# handling of pkgs/stdenv/generic/make-derivation.nix that the flake and its inputs rely on (a function
# of finalAttrs or an attribute set, `overrideAttrs` composing like nixpkgs' extends, `passthru` and
# `meta` kept off the derivation, `env` merged into it, `name` from pname and version, null inputs
# dropped) and the platform attributes pyproject.nix reads. Every derivation is real (store paths,
# string contexts and `nix derivation show` are Nix's own), and its builder only fails: nothing here
# can be built.
{ lib, system }:
let
  platform = lib.systems.elaborate system;

  refuse = "echo 'lab/upstream_eval stand-in nixpkgs: evaluation only, nothing can be built' >&2; exit 1";

  # The shell every stand-in derivation names as its builder (nixpkgs: stdenv.shell, bash).
  shell = builtins.derivation {
    name = "standin-bash-5.3";
    inherit system;
    builder = "/bin/sh";
    args = [
      "-c"
      refuse
    ];
  };

  inputLists = [
    "nativeBuildInputs"
    "buildInputs"
    "propagatedBuildInputs"
    "propagatedNativeBuildInputs"
    "depsBuildBuild"
    "depsTargetTargetPropagated"
  ];

  # make-derivation.nix: mkDerivationSimple. The attributes become the derivation's environment.
  mkDerivationSimple =
    overrideAttrs: args:
    let
      name =
        args.name or (
          if args ? pname && args ? version then
            "${args.pname}-${args.version}"
          else
            throw "stdenv.mkDerivation: neither name nor pname and version"
        );
      env = args.env or { };
      clash = builtins.attrNames (builtins.intersectAttrs env args);
      passthru = args.passthru or { };
      meta = args.meta or { };
      lists = lib.genAttrs (builtins.filter (n: args ? ${n}) inputLists) (n: lib.remove null args.${n});
      drvArgs =
        builtins.removeAttrs args [
          "passthru"
          "meta"
          "env"
          "pos"
        ]
        // lists
        // env
        // {
          inherit name system;
          builder = "${shell}/bin/bash";
          args = [
            "-c"
            refuse
          ];
          stdenv = shell;
        };
      drv =
        if clash != [ ] then
          throw "stdenv.mkDerivation ${name}: ${toString clash} given both as attributes and in env"
        else
          builtins.derivation drvArgs;
    in
    lib.extendDerivation true (
      passthru
      // {
        inherit meta passthru overrideAttrs;
      }
      // lists
      // builtins.intersectAttrs {
        pname = null;
        version = null;
        src = null;
      } args
    ) drv;

  # make-derivation.nix: makeDerivationExtensible. overrideAttrs takes `{ }`, `prev: { }` or
  # `final: prev: { }` (lib.toExtension) and composes over the previous attribute function.
  extensible =
    rattrs:
    let
      args = rattrs (args // { inherit finalPackage overrideAttrs; });
      overrideAttrs = f0: extensible (lib.extends (lib.toExtension f0) rattrs);
      finalPackage = mkDerivationSimple overrideAttrs (
        builtins.removeAttrs args [
          "finalPackage"
          "overrideAttrs"
        ]
      );
    in
    finalPackage;

  mkDerivation = fnOrAttrs: extensible (if builtins.isFunction fnOrAttrs then fnOrAttrs else _: fnOrAttrs);
in
{
  inherit mkDerivation shell refuse;
  stdenv = {
    inherit mkDerivation shell system;
    hostPlatform = platform;
    buildPlatform = platform;
    targetPlatform = platform;
    inherit (platform) isLinux isDarwin;
    # pyproject.nix reads the C library's name and version (manylinux tags) and the kernel headers'
    # version (PEP 508 platform_release): glibc as in nixpkgs of mid-2026.
    cc = {
      libc = {
        pname = "glibc";
        version = "2.42";
        linuxHeaders.version = "6.15";
      };
      isGNU = true;
    };
  };
}
