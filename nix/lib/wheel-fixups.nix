# What each locked wheel needs in the store, from pkgs/server-env/elf-needs.json (written by
# nix/tools/wheel_elf_needs.py from the real wheels). Builtins only; pkgs/server-env/fixups.nix turns
# the plan into autoPatchelf settings.
#
# Per wheel:
#   searchPaths     sibling wheels' library directories holding its DT_NEEDED sonames
#                   (addAutoPatchelfSearchPath: autoPatchelf puts the directories it finds them in on
#                   the RUNPATH);
#   appendRunpaths  directories its libraries dlopen from through their original $ORIGIN RUNPATH (its
#                   own output, `own = true`, or a sibling's). autoPatchelf rebuilds every RUNPATH from
#                   the DT_NEEDED hits alone, so these are appended again (its `appendRunpaths`);
#   driver          whether a library of it needs or dlopens the NVIDIA driver (libcudart dlopens
#                   libcuda.so.1): autoAddDriverRunpath;
#   unresolved      sonames nobody in the set ships.
let
  inherit (builtins)
    any
    attrNames
    concatLists
    elem
    filter
    mapAttrs
    match
    ;

  # Of two wheels shipping one soname, the CUDA 13 one (the set's CUDA); the CUDA 12 build of the
  # CuTe DSL runtime ships the same file names.
  notProviders = [ "nvidia-cutlass-dsl-libs-cu12" ];

  isDriver = soname: match "(libcuda|libcudadebugger|libnvcuvid|libnvidia-[a-z0-9-]+)\\.so(\\.[0-9]+)*" soname != null;

  directories =
    self: providers:
    concatLists (
      map (
        provider:
        map (dir: {
          inherit provider dir;
          own = provider == self;
        }) providers.${provider}
      ) (filter (p: !(elem p notProviders)) (attrNames providers))
    );

  plan =
    elfNeeds:
    mapAttrs (name: entry: {
      inherit (entry) version unresolved;
      searchPaths = directories name entry.needs;
      appendRunpaths = directories name (entry.dlopens or { });
      driver = (entry.driver or false) || any isDriver entry.unresolved;
    }) elfNeeds.packages;
in
{
  inherit plan isDriver notProviders;
}
