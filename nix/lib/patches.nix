# Patch series on disk. Builtins only.
let
  inherit (builtins)
    attrNames
    filter
    match
    pathExists
    readDir
    sort
    ;

  # File names of `dir`'s *.patch files in name order (the order they apply in); [ ] when the
  # directory does not exist.
  names =
    dir:
    if !(pathExists dir) then
      [ ]
    else
      let
        entries = readDir dir;
      in
      sort (a: b: a < b) (filter (n: entries.${n} == "regular" && match ".*\\.patch" n != null) (attrNames entries));

  # The same series as paths.
  series = dir: map (n: dir + "/${n}") (names dir);
in
{
  inherit names series;
}
