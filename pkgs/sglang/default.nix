# SGLang at the pinned git commit with our patch series, replacing the locked 0.5.20 wheel in the
# set (its dependencies stay the lock's, so uv checked the whole closure).
#
# Pins (nix/pins, written by `nix run .#lock`): sglang-src.json {owner, repo, rev, narHash},
# sglang-cargo.json {rev, locks, outputHashes} and the Cargo.lock files it lists, committed under
# sglang-cargo-locks/ at their place in the source tree (as nixpkgs' sglang commits its Cargo.lock
# beside the package). Any of them absent -> evaluation stops with one line naming the command.
# Nothing is read from the fetched source at evaluation time (no import-from-derivation).
#
# Rust: python/setup.py discovers the extension crates of the workspace in ../rust plus the
# stand-alone workspaces its metadata names (each with its own Cargo.lock) and builds them with
# setuptools-rust and `--locked`. Each lock is vendored by rustPlatform.importCargoLock; the main
# workspace's comes first in the joined directory, so cargoSetupHook configures cargo with its
# .cargo/config.toml and checks its Cargo.lock against the tree's (cargoRoot), as in nixpkgs' sglang;
# nix/lib/cargo.nix refuses locks whose git sources or crate versions that joining would lose, and
# postPatch compares the other locks with the tree's. As in nixpkgs' sglang: PROTOC, setuptools-rust
# and setuptools-scm (a GitHub tarball has no .git, hence the pretend version).
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

  cargoPin = blib.pins.read (pinsDir + "/sglang-cargo.json");
  outputHashes = blib.pins.cargoOutputHashes "nix/pins/sglang-cargo.json" cargoPin;
  locks = blib.pins.cargoLocks {
    pin = cargoPin;
    locksDir = pinsDir + "/sglang-cargo-locks";
    inherit (pin) rev;
  };
  parsed = map (l: l.lock) locks;
  main = builtins.head locks;
  unpinned = blib.cargo.missingOutputHashes parsed outputHashes;
  unreplaced = blib.cargo.unreplacedGitSources parsed;
  conflicts = blib.cargo.conflictingCrates parsed;

  vendor =
    l:
    pkgs.rustPlatform.importCargoLock {
      lockFile = l.file;
      outputHashes = blib.cargo.outputHashesFor l.lock outputHashes;
    };
  cargoDeps =
    if unpinned != [ ] then
      blib.pins.absent "nix/pins/sglang-cargo.json outputHashes for ${lib.concatStringsSep ", " unpinned}"
    else if unreplaced != [ ] then
      throw "pkgs/sglang: git sources of SGLang's extension Cargo locks missing from ${main.path}: ${lib.concatStringsSep ", " unreplaced}; the joined vendor directory's cargo config would not replace them"
    else if conflicts != [ ] then
      throw "pkgs/sglang: SGLang's Cargo locks take ${lib.concatStringsSep ", " conflicts} from different sources; one vendor directory cannot hold both"
    else if builtins.length locks == 1 then
      vendor main
    else
      pkgs.symlinkJoin {
        name = "cargo-vendor-dir";
        paths = map vendor locks;
      };

  # Relative to sourceRoot (python/): the main workspace, whose Cargo.lock cargoSetupHook validates.
  cargoRoot = "../${dirOf main.path}";
  extensionLocks = builtins.tail locks;

  # A local version label: the lock says 0.5.20, the commit is past it.
  version = "${locked.version}+g${builtins.substring 0 8 pin.rev}";
in
locked.overrideAttrs (old: {
  inherit
    src
    version
    patches
    cargoDeps
    cargoRoot
    ;
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
    pkgs.rustPlatform.cargoSetupHook
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
  };

  # The build writes next to python/ (cargo's target dirs under rust/), which unpacking leaves
  # read-only. The extension workspaces' locks must be the committed ones (cargoSetupHook checks the
  # main workspace's).
  postUnpack = (old.postUnpack or "") + ''
    chmod -R u+w "$NIX_BUILD_TOP/${src.name}"
  '';
  postPatch =
    (old.postPatch or "")
    + lib.concatMapStrings (l: ''
      cmp ../${l.path} ${l.file} \
        || { echo "${l.path} differs from nix/pins/sglang-cargo-locks/${l.path}: run \`${blib.pins.lockCommand}\`" >&2; exit 1; }
    '') extensionLocks;

  # The exact-mode preflight's content manifest (pkgs/server/src/exactlaunch/manifest.py): once the
  # writer has proved the whole series is applied, the sha256 of every file it touches, as installed.
  # Without a series (the GPU checks' stock tree) there is nothing to prove and no manifest: the
  # launcher's preflight refuses that tree, as it must.
  postInstall =
    (old.postInstall or "")
    + lib.optionalString (patches != [ ]) ''
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
