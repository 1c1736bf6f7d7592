# Evaluates pkgs/server-env's overlays (uv.lock -> uv2nix set, ./fixups.nix, the sglang/deep-gemm
# overrides, the CUDA tree) on a machine without nixpkgs: the real uv2nix and pyproject.nix, the
# real nixpkgs `lib`, and stand-ins for stdenv, python and the few nixpkgs packages involved
# (the SGLang source is the lib tests' fixture tree). Prints what each package would be built
# from: format, hooks, autoPatchelf search paths and ignores, patches, the Cargo vendor input.
#
#   nix-instantiate --eval --strict --json nix/tools/probe-server-env.nix \
#     --arg nixpkgsLib /path/to/nixpkgs/lib --arg uv2nix /path/to/uv2nix --arg pyprojectNix /path/to/pyproject.nix
{
  nixpkgsLib,
  uv2nix,
  pyprojectNix,
}:
let
  root = ../..;
  lib = import nixpkgsLib;
  pyproject-nix = import pyprojectNix { inherit lib; };
  uv2nixLib = import (uv2nix + "/lib") { inherit lib pyproject-nix; };
  blib = import ../lib;
  recipe = blib.recipe.load ../recipes/qwen3.8-27b-exact.json;
  fixtures = ../lib/tests/fixtures;
  pinsDir = fixtures + "/pins-complete";

  workspace = uv2nixLib.workspace.loadWorkspace { workspaceRoot = root + "/pkgs/server-env"; };
  platform = lib.systems.elaborate "x86_64-linux";

  # A derivation stand-in: its attributes, an outPath and overrideAttrs.
  mkDrv =
    attrsOrFn:
    let
      attrs = if builtins.isFunction attrsOrFn then lib.fix attrsOrFn else attrsOrFn;
    in
    attrs
    // {
      type = "derivation";
      outPath = "/nix/store/${builtins.substring 0 32 (builtins.hashString "sha256" (attrs.pname or attrs.name))}-${attrs.pname or attrs.name}";
      overrideAttrs = f: mkDrv (attrs // (if builtins.isFunction f then f attrs else f));
    };
  stdenv = {
    targetPlatform = platform;
    hostPlatform = platform;
    buildPlatform = platform;
    isLinux = true;
    isDarwin = false;
    cc.libc = {
      pname = "glibc";
      version = "2.40";
      linuxHeaders.version = "6.12.0";
    };
    mkDerivation = mkDrv;
  };
  python = {
    pname = "python3";
    version = "3.12.11";
    pythonVersion = "3.12";
    implementation = "cpython";
    passthru = {
      implementation = "cpython";
      pythonVersion = "3.12";
      sourceVersion = {
        major = "3";
        minor = "12";
        patch = "11";
      };
    };
    inherit stdenv;
    sitePackages = "lib/python3.12/site-packages";
    outPath = "/nix/store/python3";
  };
  stand = name: mkDrv { inherit name; meta.mainProgram = name; };
  pkgs = {
    inherit lib;
    zlib = stand "zlib";
    autoAddDriverRunpath = stand "autoAddDriverRunpath";
    autoPatchelfHook = stand "autoPatchelfHook";
    cargo = stand "cargo";
    rustc = stand "rustc";
    buildPackages.protobuf = stand "protoc";
    fetchurl = args: mkDrv { name = args.name or (baseNameOf args.url); passthru.url = args.url; fetched = args; };
    fetchFromGitHub = args: { outPath = toString fixtures; name = "source"; inherit (args) rev; fetched = args; };
    rustPlatform.importCargoLock = args: mkDrv { name = "cargo-vendor-dir"; imported = args; };
    makeWrapper = stand "makeWrapper";
    gcc14 = stand "gcc";
    uv = stand "uv";
    python3 = stand "python3";
    runCommand = name: attrs: script: mkDrv (attrs // { inherit name script; });
    python3Packages = {
      setuptools = stand "setuptools";
      buildPythonApplication = attrs: mkDrv (attrs // { name = attrs.pname; });
    };
  };
  base = {
    inherit python stdenv pkgs;
    inherit (pkgs) fetchurl autoPatchelfHook;
    unzip = stand "unzip";
    pythonManylinuxPackages = {
      manylinux1 = [ (stand "manylinux1") ];
      manylinux2010 = [ (stand "manylinux2010") ];
      manylinux2014 = [ (stand "manylinux2014") ];
    };
    pyprojectHook = stand "pyprojectHook";
    pyprojectWheelHook = stand "pyprojectWheelHook";
    pyprojectEditableHook = stand "pyprojectEditableHook";
    resolveBuildSystem = spec: map (name: stand "build-system-${name}") (builtins.attrNames spec);
  };
  callPackage = f: args: f (builtins.intersectAttrs (builtins.functionArgs f) (pkgs // set) // args);

  # The overlays of pkgs/server-env/default.nix, in its order (build-system-pkgs left out).
  overlays = lib.composeManyExtensions [
    (workspace.mkPyprojectOverlay { sourcePreference = "wheel"; })
    (import (root + "/pkgs/server-env/fixups.nix") {
      inherit lib pkgs python blib pinsDir;
      elfNeeds = lib.importJSON (root + "/pkgs/server-env/elf-needs.json");
    })
    (final: prev: {
      sglang = callPackage (import (root + "/pkgs/sglang")) {
        locked = prev.sglang;
        inherit blib pinsDir;
        patches = blib.patches.series (root + "/patches/sglang");
      };
      sgl-deep-gemm = callPackage (import (root + "/pkgs/deep-gemm")) {
        locked = prev.sgl-deep-gemm;
        patches = blib.patches.series (root + "/patches/deep-gemm");
        inherit (recipe.deepGemm) fencedHeader;
      };
    })
  ];
  set = base // overlays set base // { inherit callPackage; };

  names = d: map (x: x.name or (toString x)) d;
  show = d: {
    inherit (d) version;
    format = d.passthru.format or null;
    source = if d ? src then d.src.fetched.name or d.src.fetched.url or d.src.fetched.rev or null else null;
    hooks = names (d.nativeBuildInputs or [ ]);
    buildInputs = names (d.buildInputs or [ ]);
    ignoreMissing = d.autoPatchelfIgnoreMissingDeps or [ ];
    searchPaths = builtins.filter (l: l != "") (lib.splitString "\n" (d.preFixup or ""));
  };
  locked = builtins.attrNames (workspace.mkPyprojectOverlay { sourcePreference = "wheel"; } set base);
in
{
  packages = builtins.length locked;
  formats = builtins.mapAttrs (_: builtins.length) (
    builtins.groupBy (n: toString (set.${n}.passthru.format or "virtual")) locked
  );
  torch = show set.torch;
  sgl-deep-gemm = show set.sgl-deep-gemm // { inherit (set.sgl-deep-gemm) postInstall; };
  cuda-tile = show set.cuda-tile;
  sglang = show set.sglang // {
    inherit (set.sglang) sourceRoot patchFlags env;
    patches = map baseNameOf set.sglang.patches;
    cargoLock = set.sglang.passthru.cargoDeps.imported.lockFileContents;
  };
  server =
    let
      drv = callPackage (import (root + "/pkgs/server")) {
        serverEnv = {
          inherit python;
          pythonSet = set;
          mkEnv = name: extra: mkDrv { inherit name; spec = builtins.attrNames extra; };
        };
        recipePath = ../recipes/qwen3.8-27b-exact.json;
      };
    in
    {
      inherit (drv) name script;
      mainProgram = drv.meta.mainProgram;
      venvSpec = drv.passthru.venv.spec;
    };
  lock =
    let
      drv = callPackage (import (root + "/pkgs/lock")) { };
    in
    {
      # (its src is a lib.fileset source, which needs Nix >= 2.14's readFileType to evaluate)
      inherit (drv) name makeWrapperArgs pythonImportsCheck;
    };
  cpuChecks = builtins.mapAttrs (_: d: d.name or "${d.pname}-${d.version}") (
    import ../cpu-checks.nix {
      inherit lib blib recipe;
      pkgs = pkgs // {
        python3 = stand "python3";
      };
      recipePath = ../recipes/qwen3.8-27b-exact.json;
      deep-gemm = set.sgl-deep-gemm;
      sglangSrc = set.sglang.passthru.src;
      sglangPatches = blib.patches.series (root + "/patches/sglang");
    }
  );
  cudaHome =
    (import (root + "/pkgs/server/cuda-home.nix") {
      inherit lib python;
      pythonSet = set;
      # The script names every wheel's tree, so building it forces each wheel name to exist.
      runCommand = name: _: script: { inherit name script; };
    });
}
