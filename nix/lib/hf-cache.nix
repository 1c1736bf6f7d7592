# Hugging Face weights as data: a weights manifest (pkgs/weights/manifests/<org>--<name>.json, written
# by `nix run .#lock`) -> one fetch spec per file, and the plan of an HF hub cache that
# huggingface_hub resolves offline (HF_HUB_OFFLINE=1) for `--model-path <org>/<name>`.
#
# builtins only (no nixpkgs), so it evaluates and is tested offline. What huggingface_hub needs,
# read in huggingface_hub 1.32.0 (the server lock's version), file_download.py / _snapshot_download.py:
#   <cache>/models--<org>--<name>/refs/main          the commit hash, read with f.read(): no newline
#   <cache>/models--<org>--<name>/snapshots/<rev>/<path>   each file (os.path.exists: links are fine)
# blobs/ and the trees/ listing cache are optional: without trees/<rev>.json the snapshot is taken as is.
let
  lockFix = "run `nix run .#lock` on a machine with network access to write it";

  hex40 = s: builtins.match "[0-9a-f]{40}" s != null;
  hex64 = s: builtins.match "[0-9a-f]{64}" s != null;
  sri256 = s: builtins.match "sha256-[A-Za-z0-9+/]{43}=" s != null;

  splitRepo =
    repo:
    let
      parts = builtins.match "([A-Za-z0-9][A-Za-z0-9._-]*)/([A-Za-z0-9][A-Za-z0-9._-]*)" repo;
    in
    if parts == null then
      throw "hf-cache: '${repo}' is not a Hugging Face repo id of the form <org>/<name>"
    else
      {
        org = builtins.elemAt parts 0;
        name = builtins.elemAt parts 1;
      };

  # Characters a store path name may hold; anything else in a repo file path becomes '_'.
  storeNameChars = "[A-Za-z0-9+._?=-]";
  sanitizeChar = c: if builtins.match storeNameChars c != null then c else "_";
  sanitize =
    s:
    builtins.concatStringsSep "" (
      builtins.genList (i: sanitizeChar (builtins.substring i 1 s)) (builtins.stringLength s)
    );

  hasDuplicates =
    xs:
    let
      sorted = builtins.sort builtins.lessThan xs;
      n = builtins.length sorted;
    in
    n > 1
    && builtins.any (i: builtins.elemAt sorted i == builtins.elemAt sorted (i + 1)) (
      builtins.genList (i: i) (n - 1)
    );
in
rec {
  inherit splitRepo;

  # File name of a repo's manifest under pkgs/weights/manifests/.
  manifestFileName =
    repo:
    let
      r = splitRepo repo;
    in
    "${r.org}--${r.name}.json";

  # The repo's folder in the hub cache (huggingface_hub's repo_folder_name for a model).
  repoFolder =
    repo:
    let
      r = splitRepo repo;
    in
    "models--${r.org}--${r.name}";

  # Read and check the manifest of `repo` at `revision` from `manifestsDir`. A missing file is the
  # normal state before the lock tool has run: one line naming the fix.
  readManifest =
    {
      manifestsDir,
      repo,
      revision,
    }:
    let
      file = manifestsDir + "/${manifestFileName repo}";
      where = "pkgs/weights/manifests/${manifestFileName repo}";
    in
    if !builtins.pathExists file then
      throw "weights manifest for ${repo}@${revision} is absent (${where}): ${lockFix}"
    else
      validateManifest {
        inherit repo revision where;
        manifest = builtins.fromJSON (builtins.readFile file);
      };

  # Contract schema: {repo, revision (40 hex), files: [{path, size, sha256, lfs}]}. Anything else is
  # an error that names the manifest and the fix; the result is the manifest unchanged.
  validateManifest =
    {
      manifest,
      repo,
      revision,
      where ? "the manifest of ${repo}",
    }:
    let
      bad = msg: throw "weights manifest ${where}: ${msg}; ${lockFix}";
      checkFile =
        f:
        if !(builtins.isString (f.path or null)) || f.path == "" then
          bad "a file entry has no path"
        else if builtins.match "(/.*|.*//.*|.*/|(.*/)?\\.\\.?(/.*)?)" f.path != null then
          bad "file '${f.path}' is not a plain relative path"
        else if !(builtins.isInt (f.size or null)) || f.size < 0 then
          bad "file '${f.path}' has no size"
        else if !(f ? sha256) || f.sha256 == "" || f.sha256 == null then
          bad "file '${f.path}' has no sha256 (a hash that was not computed is absent)"
        else if !(hex64 f.sha256 || sri256 f.sha256) then
          bad "file '${f.path}' has sha256 '${toString f.sha256}', neither 64 hex digits nor sha256-<base64>"
        else
          true;
      files = manifest.files or null;
    in
    if (manifest.repo or null) != repo then
      bad "it is for '${toString (manifest.repo or "?")}', not '${repo}'"
    else if (manifest.revision or null) != revision then
      bad "it pins revision '${toString (manifest.revision or "?")}' but the recipe wants '${revision}'"
    else if !(hex40 revision) then
      bad "revision '${revision}' is not a 40-hex commit hash"
    else if !(builtins.isList files) || files == [ ] then
      bad "it lists no files"
    else if hasDuplicates (map (f: f.path or "") files) then
      bad "a file path is listed twice"
    else if builtins.all checkFile files then
      manifest
    else
      bad "unreachable";

  # The hash attribute nixpkgs' fetchurl takes: `sha256` for hex (the LFS oid), `hash` for SRI.
  hashArgs = sha256: if hex64 sha256 then { inherit sha256; } else { hash = sha256; };

  # Store path name of one file: repo and path, never the revision, so a file whose content is the
  # same at a new revision keeps its store path (and its image layer).
  storeName =
    repo: path:
    let
      r = splitRepo repo;
      name = "hf-${r.org}--${r.name}--${sanitize (builtins.replaceStrings [ "/" ] [ "--" ] path)}";
    in
    # Nix refuses store path names longer than 211 characters.
    if builtins.stringLength name > 211 then
      throw "hf-cache: the store name for ${repo}/${path} would pass Nix's 211-character limit; nix/lib/hf-cache.nix needs a shorter naming rule"
    else
      name;

  # Percent-encoding of a file path for the resolve URL ('/' stays); a byte outside printable ASCII
  # has no builtin to name its code, so such a path is refused rather than sent wrong.
  urlPath =
    path:
    let
      escapes = {
        " " = "%20";
        "\"" = "%22";
        "#" = "%23";
        "%" = "%25";
        "&" = "%26";
        "'" = "%27";
        "(" = "%28";
        ")" = "%29";
        "+" = "%2B";
        "," = "%2C";
        ":" = "%3A";
        ";" = "%3B";
        "<" = "%3C";
        "=" = "%3D";
        ">" = "%3E";
        "?" = "%3F";
        "@" = "%40";
        "[" = "%5B";
        "\\" = "%5C";
        "]" = "%5D";
        "^" = "%5E";
        "`" = "%60";
        "{" = "%7B";
        "|" = "%7C";
        "}" = "%7D";
        "!" = "%21";
        "$" = "%24";
        "*" = "%2A";
      };
      enc =
        c:
        if builtins.match "[A-Za-z0-9._~/-]" c != null then
          c
        else
          escapes.${c} or (throw "hf-cache: file path '${path}' has a character outside printable ASCII; rename support is missing in nix/lib/hf-cache.nix");
    in
    builtins.concatStringsSep "" (
      builtins.genList (i: enc (builtins.substring i 1 path)) (builtins.stringLength path)
    );

  url = repo: revision: path: "https://huggingface.co/${repo}/resolve/${revision}/${urlPath path}";

  # One fetch spec per manifest file, in the manifest's order: {name, url, repo, path, size, lfs,
  # hash args}.
  fetchSpecs =
    manifest:
    let
      specs = map (
        f:
        {
          name = storeName manifest.repo f.path;
          url = url manifest.repo manifest.revision f.path;
          inherit (manifest) repo;
          inherit (f) path size;
          lfs = f.lfs or false;
        }
        // hashArgs f.sha256
      ) manifest.files;
    in
    if hasDuplicates (map (s: s.name) specs) then
      throw "hf-cache: two files of ${manifest.repo} map to the same store name; rename rules in nix/lib/hf-cache.nix need a change"
    else
      specs;

  # The hub cache plan for several manifests: the files to link (relative path in the cache ->
  # the fetch spec's name, repo and path) and the small text files to write (refs). Paths are relative to the
  # directory HF_HUB_CACHE points at.
  cacheLayout =
    manifests:
    let
      one = m: {
        links = map (s: {
          target = "${repoFolder m.repo}/snapshots/${m.revision}/${s.path}";
          inherit (s) name repo path;
        }) (fetchSpecs m);
        texts = [
          {
            target = "${repoFolder m.repo}/refs/main";
            text = m.revision;
          }
        ];
      };
      parts = map one manifests;
      links = builtins.concatLists (map (p: p.links) parts);
      texts = builtins.concatLists (map (p: p.texts) parts);
    in
    if hasDuplicates (map (m: m.repo) manifests) then
      throw "hf-cache: a repo is given twice to cacheLayout"
    else
      { inherit links texts; };

  # Where a repo's snapshot lives inside the cache (what `--model-path <repo>` resolves to).
  snapshotDir = m: "${repoFolder m.repo}/snapshots/${m.revision}";

  # What the image's preflight checks at start: per repo, the revision and every file with its size.
  completenessSpec =
    manifests:
    map (m: {
      inherit (m) repo revision;
      snapshot = snapshotDir m;
      files = map (f: { inherit (f) path size; }) m.files;
    }) manifests;

  totalBytes = manifests: builtins.foldl' (acc: m: acc + builtins.foldl' (a: f: a + f.size) 0 m.files) 0 manifests;
}
