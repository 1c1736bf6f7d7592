# Cargo lock handling for SGLang's Rust extensions. Builtins only.
# SGLang keeps more than one Cargo workspace under rust/ (the main workspace and stand-alone extension
# crates with their own Cargo.lock, which python/setup.py builds with `--locked`). The locks are
# committed beside the pins (nix/pins/sglang-cargo-locks/, written by `nix run .#lock`) so that
# evaluation reads no fetched source; each becomes one rustPlatform.importCargoLock vendor directory and
# pkgs/sglang joins them into the one directory cargo's source replacement points at.
let
  inherit (builtins)
    attrNames
    concatLists
    elem
    filter
    fromTOML
    hasAttr
    head
    listToAttrs
    readFile
    substring
    tail
    ;

  # Third-party packages (those with a `source`) of a parsed Cargo.lock.
  sourced = lock: filter (p: hasAttr "source" p) (lock.package or [ ]);

  isGit = p: substring 0 4 p.source == "git+";

  key = p: "${p.name}-${p.version}";

  unique = xs: attrNames (listToAttrs (map (x: { name = x; value = null; }) xs));

  # "name-version" of every git dependency, the keys importCargoLock wants in outputHashes.
  gitDependencies = locks: unique (map key (filter isGit (concatLists (map sourced locks))));

  # Git dependencies that have no entry in outputHashes (empty when everything is pinned).
  missingOutputHashes = locks: outputHashes: filter (k: !(hasAttr k outputHashes)) (gitDependencies locks);

  # The outputHashes one lock's importCargoLock takes: a key naming no git dependency of that lock
  # makes importCargoLock throw ("A hash was specified for ..."), so each lock gets its own subset.
  outputHashesFor =
    lock: outputHashes:
    listToAttrs (
      map (k: {
        name = k;
        value = outputHashes.${k};
      }) (filter (k: hasAttr k outputHashes) (gitDependencies [ lock ]))
    );

  # Git sources of the extension locks (all but the first) that the main lock (the first) lacks. The
  # joined vendor directory carries the main lock's .cargo/config.toml, whose source replacements
  # cover only the main lock's git sources.
  unreplacedGitSources =
    locks:
    let
      mainSources = map (p: p.source) (filter isGit (sourced (head locks)));
    in
    unique (
      filter (s: !(elem s mainSources)) (map (p: p.source) (filter isGit (concatLists (map sourced (tail locks)))))
    );

  # "name-version" keys that two locks take from different sources: the vendor directories name a crate
  # by name-version alone, so joining them would keep one and build the other lock against it.
  conflictingCrates =
    locks:
    let
      # One pass over every crate of every lock; attrNames comes sorted.
      byKey = builtins.groupBy key (concatLists (map sourced locks));
    in
    filter (k: builtins.length (unique (map (p: p.source) byKey.${k})) > 1) (attrNames byKey);

  parse = path: fromTOML (readFile path);
in
{
  inherit
    gitDependencies
    missingOutputHashes
    outputHashesFor
    unreplacedGitSources
    conflictingCrates
    parse
    ;
}
