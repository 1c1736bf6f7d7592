# Pins (nix/pins/*.json, written by `nix run .#lock`) -> fetch specs. Builtins only.
# A hash this machine could not compute is a missing key (or file), never a placeholder; anything
# that needs it throws one line naming the command that fills it.
let
  cargo = import ./cargo.nix;
  inherit (builtins)
    concatLists
    fromJSON
    hasAttr
    isString
    match
    pathExists
    readFile
    replaceStrings
    ;

  lockCommand = "nix run .#lock";

  absent = what: throw "${what} is not pinned yet: run `${lockCommand}` on a machine with network access and commit nix/pins/";

  isRev = s: isString s && match "[0-9a-f]{40}" s != null;
  isSriSha256 = s: isString s && match "sha256-[A-Za-z0-9+/]{43}=" s != null;

  # A pin file's contents, or null when the file does not exist.
  read = path: if pathExists path then fromJSON (readFile path) else null;

  # fetchFromGitHub arguments for a {owner, repo, rev, narHash} pin; `name` names the pin in errors.
  githubSrc =
    name: pin:
    if pin == null then
      absent "${name} (file missing)"
    else if !(isRev (pin.rev or null)) then
      throw "${name}: rev must be a 40-hex commit, got ${builtins.toJSON (pin.rev or null)}"
    else if !(hasAttr "narHash" pin) then
      absent "${name} narHash for ${pin.owner}/${pin.repo}@${pin.rev}"
    else if !(isSriSha256 pin.narHash) then
      throw "${name}: narHash must be an SRI sha256 (sha256-...), got ${builtins.toJSON pin.narHash}"
    else
      {
        inherit (pin) owner repo rev;
        hash = pin.narHash;
      };

  # {"name-version" = hash} for Cargo git dependencies, from a {"outputHashes": {...}} pin.
  cargoOutputHashes =
    name: pin:
    if pin == null || !(hasAttr "outputHashes" pin) then
      absent "${name} (Cargo git dependency hashes)"
    else
      pin.outputHashes;

  # The committed Cargo locks of the SGLang source at `rev`, main workspace first, each as
  # { path = "rust/Cargo.lock" (its place in the source tree); file (under `locksDir`); lock (parsed) }.
  # `pin` is nix/pins/sglang-cargo.json: { rev, locks = [ paths ], outputHashes }. Reading committed
  # files instead of the fetched tree keeps evaluation free of import-from-derivation.
  cargoLocks =
    {
      pin,
      locksDir,
      rev,
    }:
    let
      one =
        path:
        let
          file = locksDir + "/${path}";
        in
        if pathExists file then
          {
            inherit path file;
            lock = cargo.parse file;
          }
        else
          absent "nix/pins/sglang-cargo-locks/${path} (listed in nix/pins/sglang-cargo.json)";
    in
    if pin == null || !(hasAttr "locks" pin) then
      absent "nix/pins/sglang-cargo.json locks (SGLang's Cargo.lock files)"
    else if (pin.rev or null) != rev then
      throw "nix/pins/sglang-cargo.json was written for sglang ${toString (pin.rev or "(no rev)")} but nix/pins/sglang-src.json pins ${rev}: run `${lockCommand}` on a machine with network access and commit nix/pins/"
    else if pin.locks == [ ] then
      throw "nix/pins/sglang-cargo.json lists no Cargo.lock: run `${lockCommand}` on a machine with network access and commit nix/pins/"
    else
      map one pin.locks;

  # fetchurl arguments for a {url, hash} pin.
  urlSrc =
    name: pin:
    if pin == null then
      absent name
    else if !(isSriSha256 (pin.hash or null)) then
      absent "${name} hash"
    else
      { inherit (pin) url hash; };

  # Weights manifest of an HF repo ("org/name" -> <dir>/org--name.json).
  manifestPath = dir: repo: dir + "/${replaceStrings [ "/" ] [ "--" ] repo}.json";

  # What is still absent, one line each, for the `pins` check and README (never throws).
  #   pinsDir: nix/pins; manifestsDir: pkgs/weights/manifests; repos: HF repos that need a
  #   manifest; wheelStubs: dists whose PyPI sdist only downloads a wheel from another index;
  #   engine: the recipe's {repo = "owner/name"; rev} the source pin serves (a pin of another rev is
  #   not the recipe's, as `nix run .#lock -- status` says too).
  missing =
    {
      pinsDir,
      manifestsDir,
      repos,
      wheelStubs,
      engine ? null,
    }:
    let
      src = read (pinsDir + "/sglang-src.json");
      srcFor =
        if engine == null || src == null then
          [ ]
        else if "${toString (src.owner or "")}/${toString (src.repo or "")}" != engine.repo || (src.rev or null) != engine.rev then
          [
            "nix/pins/sglang-src.json: it pins ${toString (src.owner or "?")}/${toString (src.repo or "?")}@${toString (src.rev or "?")}, the recipe's engine is ${engine.repo}@${engine.rev}"
          ]
        else
          [ ];
      cargoPin = read (pinsDir + "/sglang-cargo.json");
      stubs = read (pinsDir + "/wheel-stubs.json");
      stubOk = n: stubs != null && hasAttr n stubs && isSriSha256 (stubs.${n}.hash or null);
    in
    concatLists [
      (if src != null && isSriSha256 (src.narHash or null) then [ ] else [ "nix/pins/sglang-src.json: narHash" ])
      srcFor
      (
        if cargoPin == null || !(hasAttr "outputHashes" cargoPin) then
          [ "nix/pins/sglang-cargo.json: outputHashes" ]
        else
          map (k: "nix/pins/sglang-cargo.json: ${k} is not an SRI sha256") (
            builtins.filter (k: !(isSriSha256 cargoPin.outputHashes.${k})) (
              builtins.attrNames cargoPin.outputHashes
            )
          )
      )
      (
        if cargoPin == null || !(hasAttr "locks" cargoPin) then
          [ "nix/pins/sglang-cargo.json: locks" ]
        else
          map (p: "nix/pins/sglang-cargo-locks/${p}") (
            builtins.filter (p: !(pathExists (pinsDir + "/sglang-cargo-locks/${p}"))) cargoPin.locks
          )
      )
      (concatLists (map (n: if stubOk n then [ ] else [ "nix/pins/wheel-stubs.json: ${n}" ]) wheelStubs))
      (concatLists (
        map (r: if pathExists (manifestPath manifestsDir r) then [ ] else [ "weights manifest: ${r}" ]) repos
      ))
    ];
in
{
  inherit
    lockCommand
    absent
    isRev
    isSriSha256
    read
    githubSrc
    cargoOutputHashes
    cargoLocks
    urlSrc
    manifestPath
    missing
    ;
}
