# Fix-ups for locked wheels in the store (an overlay on the pyproject.nix set).
#
# Each wheel is its own store path, so the $ORIGIN-relative links between pip's flat site-packages
# no longer resolve (torch -> nvidia-cublas, sgl-deep-gemm -> torch, ...): ./elf-needs.json, written
# by nix/tools/wheel_elf_needs.py from the DT_NEEDED entries of the locked wheels, lists for each
# wheel which sibling wheels' library directories go on autoPatchelf's search path and which
# sonames nobody in the set ships. Of those: libcuda.so.1 is the driver's (left unresolved, found
# at run time through autoAddDriverRunpath's /run/opengl-driver/lib or the host's ld.so), libz and
# libpython come from nixpkgs, and the rest are optional plugins (see `optional'` below).
#
# Sdist-only packages: the lock has one, cuda-tile, whose sdist is a wheel stub (see `fromStub`);
# checks/offline/test_nix_elfneeds.py fails when uv.lock gains another, so that its build system
# gets added here.
{
  lib,
  pkgs,
  python,
  blib,
  pinsDir,
  elfNeeds,
}:
final: prev:
let
  inherit (lib)
    concatMapStrings
    filter
    mapAttrs
    optional
    ;

  sitePackages = python.sitePackages;

  driverLibs = [ "libcuda.so.1" ];

  # Sonames that nixpkgs provides.
  fromNixpkgs = {
    "libz.so.1" = pkgs.zlib;
    "libpython${python.pythonVersion}.so.1.0" = python;
  };

  # Sonames of optional code paths, unresolved on purpose (the library that loads them copes):
  optional' = [
    # torchcodec: one core per FFmpeg major (4..8), loaded by trial; the server decodes no video.
    "libav*"
    "libsw*"
    # numba: threading layers other than its default workqueue.
    "libtbb.so.12"
    "libgomp.so.1.0.0"
    # cuFile RDMA and NVSHMEM bootstrap/transport plugins (InfiniBand, MPI, UCX, libfabric):
    # multi-node only.
    "libibverbs.so.1"
    "libmlx5.so.1"
    "librdmacm.so.1"
    "libmpi.so.40"
    "liboshmem.so.40"
    "libpmix.so.2"
    "libucp.so.0"
    "libucs.so.0"
    "libfabric.so.1"
    # torch-memory-saver: its CUDA 12 preload variants (the CUDA 13 ones resolve).
    "libcudart.so.12"
  ];

  # Of two wheels shipping one soname, the CUDA 13 one (the set's CUDA).
  preferredProviders = filter (p: p != "nvidia-cutlass-dsl-libs-cu12");

  fix =
    name: entry:
    let
      drv = prev.${name};
      unresolved = entry.unresolved;
      needsDriver = lib.any (s: builtins.elem s driverLibs) unresolved;
      nixpkgsLibs = lib.unique (lib.attrVals (filter (s: fromNixpkgs ? ${s}) unresolved) fromNixpkgs);
      providers = preferredProviders (builtins.attrNames entry.needs);
      searchPaths = lib.concatMap (p: map (dir: "${final.${p}}/${sitePackages}/${dir}") entry.needs.${p}) providers;
    in
    if drv.version != entry.version then
      throw "pkgs/server-env/elf-needs.json describes ${name} ${entry.version} but uv.lock has ${drv.version}: rerun nix/tools/wheel_elf_needs.py"
    else if (drv.passthru.format or "") != "wheel" then
      drv
    else
      drv.overrideAttrs (old: {
        nativeBuildInputs = old.nativeBuildInputs ++ optional needsDriver pkgs.autoAddDriverRunpath;
        buildInputs = (old.buildInputs or [ ]) ++ nixpkgsLibs;
        autoPatchelfIgnoreMissingDeps = driverLibs ++ optional';
        preFixup =
          (old.preFixup or "")
          + concatMapStrings (path: ''
            addAutoPatchelfSearchPath ${path}
          '') searchPaths;
      });

  # The sdist of cuda-tile is a wheel stub: its build backend (wheel-stub) downloads the real wheel
  # from pypi.nvidia.com at build time, which a sandbox forbids. The real wheel is a pin instead.
  wheelStubs = blib.pins.read (pinsDir + "/wheel-stubs.json");
  fromStub =
    name:
    let
      drv = prev.${name};
      spec = blib.pins.urlSrc "nix/pins/wheel-stubs.json: ${name}" (
        if wheelStubs == null then null else wheelStubs.${name} or null
      );
      file = baseNameOf spec.url;
      wheelPrefix = "${builtins.replaceStrings [ "-" ] [ "_" ] name}-${drv.version}-";
    in
    if !(lib.hasPrefix wheelPrefix file) then
      throw "nix/pins/wheel-stubs.json: ${name} is locked at ${drv.version} but the pinned wheel is ${file}; run `nix run .#lock`"
    else
      drv.overrideAttrs (old: {
        src = pkgs.fetchurl {
          inherit (spec) url hash;
          name = file;
        };
        nativeBuildInputs = [
          final.pyprojectWheelHook
          pkgs.autoPatchelfHook
          pkgs.autoAddDriverRunpath
        ];
        autoPatchelfIgnoreMissingDeps = driverLibs;
        dontStrip = true;
        passthru = old.passthru // {
          format = "wheel";
        };
      });
in
mapAttrs fix elfNeeds.packages
// {
  cuda-tile = fromStub "cuda-tile";
}
