# One OCI image of the server, built with nix2container (locked in flake.lock), with the recipe's
# weights baked in (`weights` given: `.#image`) or without (`weights = null`: `.#image-dev`, which
# expects a hub cache mounted at /models). images/default.nix makes both.
#
# Why nix2container over dockerTools.streamLayeredImage: layers are explicit derivations, so each
# weight layer (nix/lib/image-plan.nix) is a buildLayer whose inputs are the weight files alone: a
# server change cannot regroup or re-hash it (its digest is computed once, at build time, and cached
# in the store), where streamLayeredImage re-tars and re-hashes ~55 GB on every load and packs store
# paths by popularity over the whole closure. Neither puts an image tarball in the store; both leave
# layers uncompressed (safetensors do not compress).
#
# Loading: `nix run .#image.copyToDockerDaemon` (skopeo to docker-daemon:<name>:<tag>), or
# `nix run .#image.copyTo -- docker-archive:/var/tmp/bitexact.tar:<name>:<tag>` then `docker load -i`
# that file. The tag is set (the recipe's name): with `tag = null` nix2container would tag with the
# image description's store hash, and copyToDockerDaemon / copyToRegistry would push that.
{
  lib,
  runCommand,
  writeText,
  makeWrapper,
  nix2container,
  # The parsed recipe and the file it was read from (the same one the server's wrapper names).
  recipe,
  recipeFile,
  # The launcher (`bitexact-server` in bin/) and a Python in which exactlaunch, sglang and deep_gemm
  # import: the entrypoint's preflight runs in it so it inspects the very files the server loads.
  server,
  python,
  # pkgs/weights (an HF hub cache with passthru.files / completeness) or null for the dev image.
  weights ? null,
  name ? "bitexact-sglang",
  # The image tag (nix2container's `tag`; null would make it the output hash).
  tag ? recipe.name,
  port ? 30000,
  # The repository's URL for org.opencontainers.image.source, when known.
  source ? null,
}:
let
  plan = import ../nix/lib/image-plan.nix;
  baked = weights != null;

  uid = 1000;
  jitCache = "/var/cache/bitexact";

  # The entrypoint's Python sources (images/entrypoint), run by the server's Python.
  entrypoint =
    runCommand "bitexact-entrypoint"
      {
        nativeBuildInputs = [ makeWrapper ];
        meta.mainProgram = "bitexact-entrypoint";
      }
      ''
        mkdir -p $out/lib $out/bin
        cp -r ${./entrypoint/src/image_entrypoint} $out/lib/image_entrypoint
        makeWrapper ${python}/bin/python $out/bin/bitexact-entrypoint \
          --prefix PYTHONPATH : $out/lib \
          --add-flags "-m image_entrypoint.main"
      '';

  # /etc/passwd and /etc/group for the non-root user, /tmp, and the JIT cache mount point.
  rootfs = runCommand "bitexact-rootfs" { } ''
    mkdir -p $out/etc $out/tmp $out${jitCache}/home
    printf 'root:x:0:0:root:/root:/noshell\nbitexact:x:${toString uid}:${toString uid}:bitexact:${jitCache}/home:/noshell\n' > $out/etc/passwd
    printf 'root:x:0:\nbitexact:x:${toString uid}:\n' > $out/etc/group
  '';
  perms = [
    {
      path = rootfs;
      regex = "/tmp$";
      mode = "1777";
    }
    {
      path = rootfs;
      regex = "${jitCache}(/home)?$";
      mode = "0755";
      inherit uid;
      gid = uid;
    }
  ];

  stack = plan.layers {
    weights = if baked then weights.manifests else [ ];
    server = server;
  };

  weightLayers = map (
    l:
    nix2container.buildLayer {
      deps = map (path: weights.files.${l.repo}.${path}) l.paths;
      metadata.created_by = "bitexact: ${l.name}";
    }
  ) (builtins.filter (l: l.kind == "weights") stack);

  # The link farm depends on the weight files only; they are already in the layers below.
  hubCacheLayers = lib.optional baked (
    nix2container.buildLayer {
      deps = [ weights ];
      layers = weightLayers;
      metadata.created_by = "bitexact: hub cache links";
    }
  );

  serverPlan = lib.last stack;
  serverLayer = nix2container.buildLayer {
    deps = [
      server
      entrypoint
    ];
    layers = weightLayers ++ hubCacheLayers;
    inherit (serverPlan) maxLayers;
    metadata.created_by = "bitexact: server closure";
  };

  env = {
    # Store paths only: the toolkit mounts host binaries (nvidia-smi) into /usr/bin, and they cannot
    # run here (no /lib64/ld-linux-x86-64.so.2); nothing should find them on PATH.
    PATH = "${entrypoint}/bin:${server}/bin";
    # NVIDIA container toolkit: which GPUs, and which driver parts to mount (compute: libcuda and its
    # JIT libraries; utility: libnvidia-ml, which the entrypoint reads the cards through).
    NVIDIA_VISIBLE_DEVICES = "all";
    NVIDIA_DRIVER_CAPABILITIES = "compute,utility";
    # No LD_LIBRARY_PATH: the toolkit mounts the driver into /usr/lib64 of this (non-Debian) rootfs,
    # and the entrypoint and the launcher find it there (gpuhost.driver) and give the server its path.
    BITEXACT_RECIPE = "${recipeFile}";
    BITEXACT_JIT_CACHE = jitCache;
    # Every JIT cache in the volume: DeepGEMM (keyed by the launcher under XDG_CACHE_HOME), Triton,
    # TorchInductor, FlashInfer and its TVM-FFI builds, the driver's PTX cache.
    XDG_CACHE_HOME = jitCache;
    HOME = "${jitCache}/home";
    TRITON_CACHE_DIR = "${jitCache}/triton";
    TORCHINDUCTOR_CACHE_DIR = "${jitCache}/torchinductor";
    FLASHINFER_WORKSPACE_BASE = "${jitCache}/flashinfer";
    TVM_FFI_CACHE_DIR = "${jitCache}/tvm-ffi";
    CUDA_CACHE_PATH = "${jitCache}/nv-compute";
    TMPDIR = "/tmp";
  }
  // (
    if baked then
      {
        BITEXACT_HF_HUB_CACHE = "${weights}";
        BITEXACT_WEIGHTS_SPEC = "${weights.completeness}";
      }
    else
      { HF_HUB_CACHE = "/models"; }
  );
in
nix2container.buildImage {
  inherit name tag;
  layers = weightLayers ++ hubCacheLayers ++ [ serverLayer ];
  copyToRoot = [ rootfs ];
  inherit perms;
  config = {
    User = "${toString uid}:${toString uid}";
    Entrypoint = [ "${entrypoint}/bin/bitexact-entrypoint" ];
    Cmd = [
      "--port"
      (toString port)
    ];
    ExposedPorts."${toString port}/tcp" = { };
    Env = lib.mapAttrsToList (k: v: "${k}=${v}") env;
    Volumes.${jitCache} = { };
    WorkingDir = "${jitCache}/home";
    Labels = plan.labels { inherit recipe baked source; };
  };
  meta.description = "bit-exact SGLang (${recipe.name})" + lib.optionalString (!baked) ", no weights";
}
