# The recipe file, read as data. Nix takes pins and names from it (engine rev and patch series,
# DeepGEMM, model and drafter, card slug, variant names); what a variant runs (argv, environment,
# serving flags) is computed in one place only, the launcher `bitexact-server`
# (pkgs/server/src/exactlaunch), which the server wrapper, the image and the GPU checks all run.
#
# The Python programs read the file with exactformats.recipe (pkgs/formats); this reader refuses what that
# one refuses of the parts Nix reads: a schema it does not know, names that cannot name files (the
# recipe's name and its variants' become paths here too: nix/gpu-checks.nix reads ./recipes/<name>.json,
# goldens live at checks/golden/<card>/<name>.json), a variant named after bitexact's own preset. A test
# holds the two equal on every committed recipe (checks/offline/test_recipe_reader.py).
let
  # exactformats.RECIPE_SCHEMAS
  schemas = [ 1 ];
  # exactformats.recipe.NAME and RESERVED_VARIANTS
  namePattern = "[a-z0-9][a-z0-9._-]{0,99}";
  reserved = [ "long" ];
  checked =
    path: what: name:
    if builtins.isString name && builtins.match namePattern name != null then
      true
    else
      throw "recipe ${toString path}: ${what} ${builtins.toJSON name} is not a recipe or variant name: lowercase letters, digits, '.', '_' or '-', starting with a letter or digit (at most 100)";
  free =
    path: name:
    if builtins.elem name reserved then
      throw "recipe ${toString path}: variant `${name}`: the name is bitexact's own preset (the recipe against no-spec on long prompts), which would shadow it; give the variant another name"
    else
      true;
  known =
    path: schema:
    if builtins.isInt schema && builtins.elem schema schemas then
      true
    else
      throw "recipe ${toString path}: schema ${builtins.toJSON schema} is not one this flake reads (${builtins.toJSON schemas}); use the flake the recipe came with";
in
{
  load =
    path:
    let
      recipe = builtins.fromJSON (builtins.readFile path);
      variants = builtins.attrNames (recipe.variants or { });
    in
    assert known path (recipe.schema or null);
    assert checked path "the name" (recipe.name or null);
    assert builtins.all (checked path "the variant name") variants;
    assert builtins.all (free path) variants;
    recipe;
}
