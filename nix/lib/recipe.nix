# The recipe file, read as data. Nix takes pins and names from it (engine rev and patch series,
# DeepGEMM, model and drafter, card slug, variant names); what a variant runs (argv, environment,
# serving flags) is computed in one place only, the launcher `bitexact-server`
# (pkgs/server/src/exactlaunch), which the server wrapper, the image and the GPU checks all run.
{
  load = path: builtins.fromJSON (builtins.readFile path);
}
