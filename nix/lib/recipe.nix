# Recipe -> final argv/env for a variant. Builtins only; the Python launcher (exactlaunch)
# implements the same semantics and both have tests against the same recipe file.
#
# Variant edits, applied in this order:
#   unset: [flag]        remove each occurrence of flag with its value (the next element unless
#                        it starts with "--"); a flag absent from argv is an error.
#   set:   {flag: value} replace every occurrence's value (error if one has no value, or if the
#                        value starts with "--"); a missing flag is appended as `flag value`.
#                        Keys apply in sorted order (Nix attrsets have no other order).
#   env:   {name: value} merged over launch.env.
# Serving flags (launch.servingFlags, the allowlist) are appended last, in allowlist order.
# The "recipe" variant is the identity even when the file does not list it.
let
  inherit (builtins)
    attrNames
    concatLists
    concatStringsSep
    elem
    elemAt
    filter
    foldl'
    fromJSON
    genList
    hasAttr
    length
    readFile
    substring
    ;

  isFlag = s: substring 0 2 s == "--";

  # Whether argv[i] (a flag) is followed by a value.
  hasValueAt = argv: i: i + 1 < length argv && !(isFlag (elemAt argv (i + 1)));

  # argv without the elements at indices in `drop`.
  without = argv: drop: concatLists (genList (i: if elem i drop then [ ] else [ (elemAt argv i) ]) (length argv));

  # Indices of every element equal to `x`.
  indicesOf = xs: x: filter (i: elemAt xs i == x) (genList (i: i) (length xs));

  unsetFlag =
    context: argv: flag:
    let
      at = indicesOf argv flag;
    in
    if at == [ ] then
      throw "${context}: cannot unset ${flag}: it is not in the argv"
    else
      without argv (concatLists (map (i: [ i ] ++ (if hasValueAt argv i then [ (i + 1) ] else [ ])) at));

  setFlag =
    context: argv: flag: value:
    let
      at = indicesOf argv flag;
      values = map (i: i + 1) at;
    in
    if isFlag value then
      throw "${context}: cannot set ${flag} to ${value}: a value may not start with --"
    else if at == [ ] then
      argv
      ++ [
        flag
        value
      ]
    else if !(builtins.all (hasValueAt argv) at) then
      throw "${context}: cannot set ${flag}: it is in the argv without a value"
    else
      genList (j: if elem j values then value else elemAt argv j) (length argv);

  load = path: fromJSON (readFile path);

  variantNames = recipe: attrNames recipe.variants;

  variant =
    recipe: name:
    if hasAttr name recipe.variants then
      recipe.variants.${name}
    else if name == "recipe" then
      { speculative = true; }
    else
      throw "recipe ${recipe.name}: no variant '${name}' (variants: ${concatStringsSep ", " (variantNames recipe)})";

  # { argv, env, speculative, client } of one variant, before serving flags.
  launch =
    recipe: name:
    let
      v = variant recipe name;
      context = "recipe ${recipe.name}, variant ${name}";
      afterUnset = foldl' (unsetFlag context) recipe.launch.argv (v.unset or [ ]);
      sets = v.set or { };
      argv = foldl' (acc: flag: setFlag context acc flag sets.${flag}) afterUnset (attrNames sets);
    in
    {
      inherit argv;
      env = recipe.launch.env // (v.env or { });
      speculative = v.speculative or (throw "${context}: no 'speculative' field");
      client = v.client or { };
    };

  # The flags of `serving` ({flag: value}) in allowlist order, to follow `argv`; a flag outside
  # the allowlist (serving flags must not carry numerics) or already in argv is an error.
  servingArgs =
    recipe: argv: serving:
    let
      allow = recipe.launch.servingFlags;
      bad = filter (f: !(elem f allow)) (attrNames serving);
      twice = filter (f: elem f argv) (attrNames serving);
    in
    if bad != [ ] then
      throw "recipe ${recipe.name}: ${concatStringsSep ", " bad} not a serving flag (allowed: ${concatStringsSep ", " allow})"
    else if twice != [ ] then
      throw "recipe ${recipe.name}: ${concatStringsSep ", " twice} already in the argv; serving flags are the launcher's"
    else
      concatLists (
        map (
          f:
          if hasAttr f serving then
            [
              f
              (toString serving.${f})
            ]
          else
            [ ]
        ) allow
      );

  # Final argv: the variant's argv followed by the serving flags.
  command =
    recipe: name: serving:
    let
      argv = (launch recipe name).argv;
    in
    argv ++ servingArgs recipe argv serving;
in
{
  inherit
    load
    variantNames
    variant
    launch
    servingArgs
    command
    ;
}
