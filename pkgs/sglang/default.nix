# SGLang at the pinned git commit with our patch series, replacing the locked 0.5.20 wheel in the
# set (its dependencies stay the lock's, so uv checked the whole closure).
#
# Pins (nix/pins, written by `nix run .#lock`): sglang-src.json {owner, repo, rev, narHash} and
# sglang-cargo.json {outputHashes}; either absent -> evaluation stops with one line naming the
# command. The Cargo.lock files are read from the fetched source (import from derivation).
#
# Rust: python/setup.py discovers the extension crates under ../rust (cargo metadata) and builds
# them with setuptools-rust, offline here, from one vendor directory made of every Cargo.lock under
# rust/ (the main workspace and stand-alone crates such as the TreeCore, which links libtorch
# through tch and so imports the set's torch at build time). As in nixpkgs' sglang: cargo, rustc,
# PROTOC, setuptools-rust and setuptools-scm (a GitHub tarball has no .git, hence the pretend
# version).
{
  lib,
  pkgs,
  pyprojectHook,
  resolveBuildSystem,
  locked,
  blib,
  pinsDir,
  patches,
}:
let
  pin = blib.pins.read (pinsDir + "/sglang-src.json");
  src = pkgs.fetchFromGitHub (blib.pins.githubSrc "nix/pins/sglang-src.json" pin);

  outputHashes = blib.pins.cargoOutputHashes "nix/pins/sglang-cargo.json" (
    blib.pins.read (pinsDir + "/sglang-cargo.json")
  );
  lockFiles = blib.cargo.lockFiles "${src}/rust";
  locks = map blib.cargo.parse lockFiles;
  unpinned = blib.cargo.missingOutputHashes locks outputHashes;
  cargoDeps =
    if lockFiles == [ ] then
      throw "sglang ${pin.rev}: no Cargo.lock under rust/; pkgs/sglang/default.nix expects SGLang's Rust workspace there"
    else if unpinned != [ ] then
      blib.pins.absent "nix/pins/sglang-cargo.json outputHashes for ${lib.concatStringsSep ", " unpinned}"
    else
      pkgs.rustPlatform.importCargoLock {
        lockFileContents = blib.cargo.mergedLockText locks;
        inherit outputHashes;
      };

  # A local version label: the lock says 0.5.20, the commit is past it.
  version = "${locked.version}+g${builtins.substring 0 8 pin.rev}";
in
locked.overrideAttrs (old: {
  inherit src version patches;
  sourceRoot = "${src.name}/python";
  # Git-format diffs relative to the repository root (a/python/sglang/...), applied from python/,
  # in name order and with no fuzz (nixpkgs' default would allow fuzz 2).
  patchFlags = [
    "-p2"
    "--fuzz=0"
  ];

  nativeBuildInputs = [
    pyprojectHook
    pkgs.cargo
    pkgs.rustc
    pkgs.autoPatchelfHook
  ]
  ++ resolveBuildSystem {
    setuptools = [ ];
    setuptools-rust = [ ];
    setuptools-scm = [ ];
    wheel = [ ];
    # The TreeCore crate builds against the set's libtorch (python/sglang/srt/rust_extensions/torch_build.py).
    torch = [ ];
  };
  buildInputs = [ ];
  dontStrip = false;

  env = (old.env or { }) // {
    PROTOC = lib.getExe pkgs.buildPackages.protobuf;
    SETUPTOOLS_SCM_PRETEND_VERSION = version;
    CARGO_NET_OFFLINE = "true";
  };

  # The build writes next to python/ (cargo's target dir under rust/), which unpacking leaves
  # read-only; cargo gets the vendored crates (crates.io and git sources alike).
  postUnpack = (old.postUnpack or "") + ''
    chmod -R u+w "$NIX_BUILD_TOP/${src.name}"
    export CARGO_HOME="$NIX_BUILD_TOP/cargo-home"
    mkdir -p "$CARGO_HOME"
    sed 's|^directory = .*|directory = "${cargoDeps}"|' ${cargoDeps}/.cargo/config.toml > "$CARGO_HOME/config.toml"
  '';

  # The exact-mode preflight's content manifest (pkgs/server/src/exactlaunch/manifest.py): once the
  # writer has proved the whole series is applied, the sha256 of every file it touches, as installed.
  postInstall = (old.postInstall or "") + ''
    mkdir -p "$NIX_BUILD_TOP/bitexact-series"
    ${lib.concatMapStrings (
      p: "ln -s ${p} \"$NIX_BUILD_TOP/bitexact-series\"/${lib.escapeShellArg (baseNameOf p)}\n"
    ) patches}
    for site in "$out"/lib/python*/site-packages; do
      ${pkgs.python3.interpreter} ${../server/src/exactlaunch/manifest.py} write "$site" \
        --series "$NIX_BUILD_TOP/bitexact-series"
    done
  '';

  passthru = old.passthru // {
    inherit src cargoDeps patches;
    format = "pyproject";
  };
})
