# The files of `root` that a check reads, as their own store path (builtins.path with a filter), so that
# a change elsewhere in the repository does not rebuild the check. Builtins only (tested by
# checks/offline/test_sandbox_selection.py with the real Nix).
#
# include: paths relative to root, files or directories (a directory brings everything under it).
# Build leftovers that a flake's source never holds (byte-code caches, egg-info) are left out.
{
  root,
  include,
  name ? "source",
}:
let
  rootString = toString root;
  prefixLength = builtins.stringLength rootString + 1;
  relative = path: builtins.substring prefixLength (builtins.stringLength path) path;
  hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;
  hasSuffix =
    suffix: s:
    let
      n = builtins.stringLength s;
      m = builtins.stringLength suffix;
    in
    n >= m && builtins.substring (n - m) m s == suffix;
  missing = builtins.filter (p: !builtins.pathExists (root + "/${p}")) include;
  wanted =
    path: type:
    let
      rel = relative (toString path);
      inside = p: rel == p || hasPrefix "${p}/" rel;
      # A directory on the way to an included path is entered (the filter prunes what it rejects).
      onTheWay = p: type == "directory" && hasPrefix "${rel}/" p;
    in
    baseNameOf rel != "__pycache__"
    && !hasSuffix ".pyc" rel
    && !hasSuffix ".egg-info" rel
    && builtins.any (p: inside p || onTheWay p) include;
in
if include == [ ] then
  throw "source-subset: `include` is empty; name the files and directories the check reads"
else if missing != [ ] then
  throw "source-subset: ${builtins.concatStringsSep ", " missing} not found under ${rootString}; fix the include list"
else
  builtins.path {
    path = root;
    inherit name;
    filter = wanted;
  }
