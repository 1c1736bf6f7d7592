# Cargo lock handling for SGLang's Rust extensions. Builtins only.
# SGLang keeps more than one Cargo workspace under rust/ (a main workspace and stand-alone
# extension crates with their own Cargo.lock); one vendor directory serves all of them, so the
# locks are merged into one package list for rustPlatform.importCargoLock.
let
  inherit (builtins)
    attrNames
    concatLists
    concatStringsSep
    filter
    fromTOML
    hasAttr
    listToAttrs
    pathExists
    readDir
    readFile
    sort
    substring
    toJSON
    ;

  # Cargo.lock files of `dir` (a path) itself and of its direct subdirectories, sorted.
  lockFiles =
    dir:
    let
      entries = readDir dir;
      subdirs = filter (n: entries.${n} == "directory") (attrNames entries);
      candidates = [ (dir + "/Cargo.lock") ] ++ map (n: dir + "/${n}/Cargo.lock") (sort (a: b: a < b) subdirs);
    in
    filter pathExists candidates;

  # Third-party packages (those with a `source`) of a parsed Cargo.lock.
  sourced = lock: filter (p: hasAttr "source" p) (lock.package or [ ]);

  isGit = p: substring 0 4 p.source == "git+";

  key = p: "${p.name}-${p.version}";

  # "name-version" of every git dependency, the keys importCargoLock wants in outputHashes.
  gitDependencies =
    locks: sort (a: b: a < b) (attrNames (listToAttrs (map (p: { name = key p; value = null; }) (filter isGit (concatLists (map sourced locks))))));

  # One Cargo.lock (the newest input version) holding the union of the locks' third-party packages, deduplicated
  # by (name, version, source). Only the fields importCargoLock reads are kept.
  mergedLockText =
    locks:
    let
      all = concatLists (map sourced locks);
      unique = attrNames (
        listToAttrs (
          map (p: {
            name = toJSON [
              p.name
              p.version
              p.source
              (p.checksum or null)
            ];
            value = null;
          }) all
        )
      );
      render =
        k:
        let
          f = builtins.fromJSON k;
          field = n: v: "${n} = ${toJSON v}\n";
        in
        "[[package]]\n"
        + field "name" (builtins.elemAt f 0)
        + field "version" (builtins.elemAt f 1)
        + field "source" (builtins.elemAt f 2)
        + (if builtins.elemAt f 3 == null then "" else field "checksum" (builtins.elemAt f 3))
        + "\n";
    in
    "version = ${toString (builtins.foldl' (v: l: if (l.version or 3) > v then l.version or 3 else v) 3 locks)}\n\n"
    + concatStringsSep "" (map render unique);

  # Git dependencies that have no entry in outputHashes (empty when everything is pinned).
  missingOutputHashes = locks: outputHashes: filter (k: !(hasAttr k outputHashes)) (gitDependencies locks);

  parse = path: fromTOML (readFile path);
in
{
  inherit
    lockFiles
    gitDependencies
    mergedLockText
    missingOutputHashes
    parse
    ;
}
