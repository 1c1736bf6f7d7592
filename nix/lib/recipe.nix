# The recipe file, read as data. Nix takes pins and names from it (engine rev and patch series,
# DeepGEMM, model and drafter, card slug, variant names); what a variant runs (argv, environment,
# serving flags) is computed in one place only, the launcher `bitexact-server`
# (pkgs/server/src/exactlaunch), which the server wrapper, the image and the GPU checks all run.
#
# The recipe's name and its variants' names become paths here too (nix/gpu-checks.nix reads
# ./recipes/<name>.json; goldens live at checks/golden/<card>/<name>.json), so they are checked against
# the pattern the launcher and bitexact use (exactlaunch.values.RECIPE_NAME, bitexact.names.NAME).
let
  namePattern = "[a-z0-9][a-z0-9._-]{0,99}";
  checked =
    path: what: name:
    if builtins.isString name && builtins.match namePattern name != null then
      true
    else
      throw "recipe ${toString path}: ${what} ${builtins.toJSON name} is not a recipe or variant name: lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (at most 100)";
in
{
  load =
    path:
    let
      recipe = builtins.fromJSON (builtins.readFile path);
      variants = builtins.attrNames (recipe.variants or { });
    in
    assert checked path "the name" (recipe.name or null);
    assert builtins.all (checked path "the variant name") variants;
    recipe;
}
