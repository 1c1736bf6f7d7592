# Pins (nix/pins/*.json, written by `nix run .#lock`) -> fetch specs. Builtins only.
# A hash this machine could not compute is a missing key (or file), never a placeholder; anything
# that needs it throws one line naming the command that fills it.
let
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
  #   manifest; wheelStubs: dists whose PyPI sdist only downloads a wheel from another index.
  missing =
    {
      pinsDir,
      manifestsDir,
      repos,
      wheelStubs,
    }:
    let
      src = read (pinsDir + "/sglang-src.json");
      cargo = read (pinsDir + "/sglang-cargo.json");
      stubs = read (pinsDir + "/wheel-stubs.json");
      stubOk = n: stubs != null && hasAttr n stubs && isSriSha256 (stubs.${n}.hash or null);
    in
    concatLists [
      (if src != null && isSriSha256 (src.narHash or null) then [ ] else [ "nix/pins/sglang-src.json: narHash" ])
      (
        if cargo == null || !(hasAttr "outputHashes" cargo) then
          [ "nix/pins/sglang-cargo.json: outputHashes" ]
        else
          map (k: "nix/pins/sglang-cargo.json: ${k} is not an SRI sha256") (
            builtins.filter (k: !(isSriSha256 cargo.outputHashes.${k})) (builtins.attrNames cargo.outputHashes)
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
    urlSrc
    manifestPath
    missing
    ;
}
