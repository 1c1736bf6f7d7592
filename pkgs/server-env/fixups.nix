# Fix-ups for locked wheels in the store (an overlay on the pyproject.nix set).
#
# Each wheel is its own store path, so the $ORIGIN-relative links between pip's flat site-packages
# no longer resolve (torch -> nvidia-cublas, sgl-deep-gemm -> torch, ...). ./elf-needs.json, written
# by nix/tools/wheel_elf_needs.py from the real locked wheels, and nix/lib/wheel-fixups.nix (the plan)
# say for each wheel: which sibling wheels' library directories go on autoPatchelf's search path (its
# DT_NEEDED), which directories its libraries dlopen from through their original RUNPATH (appended
# again: autoPatchelf rebuilds every RUNPATH from the DT_NEEDED hits alone; ./elf-dlopen.json is the
# audit), whether it loads the NVIDIA driver (autoAddDriverRunpath: libcudart has no RUNPATH and
# dlopens libcuda.so.1, and Nix's glibc does not read the host's ld.so.cache), and which sonames
# nobody in the set ships. Of those: libcuda.so.1 is the driver's (left unresolved, found at run time
# through /run/opengl-driver/lib or the launcher's driver discovery), libz and libpython come from
# nixpkgs, and the rest are optional plugins (see `optional'` below).
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

  plan = blib.wheelFixups.plan elfNeeds;

  # A planned directory in the store: the wheel's own output (placeholder) or a sibling's.
  storeDir =
    d: if d.own then "${placeholder "out"}/${sitePackages}/${d.dir}" else "${final.${d.provider}}/${sitePackages}/${d.dir}";

  fix =
    name: p:
    let
      drv = prev.${name};
      nixpkgsLibs = lib.unique (lib.attrVals (filter (s: fromNixpkgs ? ${s}) p.unresolved) fromNixpkgs);
    in
    if drv.version != p.version then
      throw "pkgs/server-env/elf-needs.json describes ${name} ${p.version} but uv.lock has ${drv.version}: rerun nix/tools/wheel_elf_needs.py"
    else if (drv.passthru.format or "") != "wheel" then
      drv
    else
      drv.overrideAttrs (old: {
        # After autoPatchelfHook (uv2nix adds it to every wheel): both run in postFixup in this
        # order, and autoPatchelf replaces the RUNPATH that addDriverRunpath extends.
        nativeBuildInputs = old.nativeBuildInputs ++ optional p.driver pkgs.autoAddDriverRunpath;
        buildInputs = (old.buildInputs or [ ]) ++ nixpkgsLibs;
        autoPatchelfIgnoreMissingDeps = lib.unique (
          driverLibs ++ filter blib.wheelFixups.isDriver p.unresolved ++ optional'
        );
        appendRunpaths = map storeDir p.appendRunpaths;
        preFixup =
          (old.preFixup or "")
          + concatMapStrings (d: ''
            addAutoPatchelfSearchPath ${storeDir d}
          '') p.searchPaths;
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
mapAttrs fix plan
// {
  cuda-tile = fromStub "cuda-tile";
}
