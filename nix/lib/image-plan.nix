# The OCI image as data: which store paths go into which layer, and the image's labels.
#
# builtins only, tested offline. images/default.nix turns the plan into nix2container layers.
# Properties the plan guarantees (and checks/offline/test_image_plan.py checks):
#  - weight layers hold only weight files and are computed from the manifests alone: the server is
#    not an argument of `weightLayers`, so a code change cannot regroup or rewrite them;
#  - weight layers come first (bottom of the stack): a docker layer's chain id depends on the layers
#    below it, so a server change on top leaves every weight layer's id, and its extracted copy, alone;
#  - a repo's files are packed only with files of the same repo (a drafter bump leaves the model's
#    layers alone), in path order, into layers of at most `capBytes`; a single file above the cap is
#    an error, never a silently bigger layer.
let
  # overlay2 stacks at most 128 layers; keep a margin for the customization layer nix2container adds.
  maxTotalLayers = 120;

  sortByPath = files: builtins.sort (a: b: a.path < b.path) files;

  # Sequential first-fit in path order: a new layer starts when the next file would pass the cap.
  pack =
    capBytes: files:
    let
      step =
        acc: f:
        if acc.current != [ ] && acc.bytes + f.size > capBytes then
          {
            done = acc.done ++ [
              {
                files = acc.current;
                inherit (acc) bytes;
              }
            ];
            current = [ f ];
            bytes = f.size;
          }
        else
          {
            inherit (acc) done;
            current = acc.current ++ [ f ];
            bytes = acc.bytes + f.size;
          };
      final = builtins.foldl' step {
        done = [ ];
        current = [ ];
        bytes = 0;
      } files;
    in
    final.done
    ++ (
      if final.current == [ ] then
        [ ]
      else
        [
          {
            files = final.current;
            inherit (final) bytes;
          }
        ]
    );

  shortRev = rev: builtins.substring 0 12 rev;
in
rec {
  inherit maxTotalLayers;

  # About 10 GB: registries and `docker load` handle layers of this size; safetensors shards are ~5 GB.
  defaultCapBytes = 10000000000;

  # weights: [{repo, revision, files = [{path, size, ...}]}] (manifests) -> the weight layers, in
  # order: [{name, repo, revision, paths = [file path ...], bytes}].
  weightLayers =
    {
      weights,
      capBytes ? defaultCapBytes,
    }:
    let
      tooBig = builtins.filter (f: f.size > capBytes) (builtins.concatMap (m: m.files) weights);
      perRepo =
        m:
        let
          groups = pack capBytes (sortByPath m.files);
          n = builtins.length groups;
        in
        builtins.genList (
          i:
          let
            g = builtins.elemAt groups i;
          in
          {
            name = "weights-${builtins.replaceStrings [ "/" ] [ "--" ] m.repo}-${shortRev m.revision}-${toString (i + 1)}of${toString n}";
            inherit (m) repo revision;
            paths = map (f: f.path) g.files;
            inherit (g) bytes;
          }
        ) n;
    in
    if tooBig != [ ] then
      throw "image-plan: ${(builtins.head tooBig).path} (${toString (builtins.head tooBig).size} bytes) is larger than the layer cap of ${toString capBytes} bytes; raise capBytes in images/default.nix"
    else
      builtins.concatMap perRepo (builtins.sort (a: b: a.repo < b.repo) weights);

  # The whole stack, bottom to top: weight layers, the hub-cache link farm (tiny; depends on the
  # weights only), then the server closure split by popularity into what is left of the layer budget.
  # `server` is any value naming the server's paths (a store path in the image, a string in tests).
  layers =
    {
      weights,
      server,
      capBytes ? defaultCapBytes,
    }:
    let
      w = weightLayers { inherit weights capBytes; };
      nWeights = builtins.length w;
      hubCache = if weights == [ ] then [ ] else [ { kind = "hub-cache"; } ];
      serverBudget = maxTotalLayers - nWeights - builtins.length hubCache;
    in
    if serverBudget < 20 then
      throw "image-plan: ${toString nWeights} weight layers leave fewer than 20 layers for the server; raise capBytes"
    else
      map (l: l // { kind = "weights"; }) w
      ++ hubCache
      ++ [
        {
          kind = "server";
          inherit server;
          maxLayers = if serverBudget > 100 then 100 else serverBudget;
        }
      ];

  # OCI labels: the standard ones plus what identifies the numerics (recipe, engine rev, patch series,
  # DeepGEMM, weight revisions). `baked` says whether the weights are inside the image.
  labels =
    {
      recipe,
      baked,
      version ? "0",
      source ? null,
    }:
    let
      repoRev = x: "${x.repo}@${x.revision}";
    in
    {
      "org.opencontainers.image.title" = "bitexact-sglang-${recipe.name}";
      "org.opencontainers.image.description" = recipe.description;
      "org.opencontainers.image.version" = version;
      "dev.bitexact.recipe" = recipe.name;
      "dev.bitexact.engine" = "${recipe.engine.repo}@${recipe.engine.rev}";
      "dev.bitexact.engine.patches" = builtins.concatStringsSep "," recipe.engine.patches;
      "dev.bitexact.deep-gemm" = "${recipe.deepGemm.dist}==${recipe.deepGemm.version}+${builtins.concatStringsSep "," recipe.deepGemm.patches}";
      "dev.bitexact.model" = repoRev recipe.model;
      "dev.bitexact.drafter" = repoRev recipe.drafter;
      "dev.bitexact.card" = recipe.card.slug;
      "dev.bitexact.weights" = if baked then "baked" else "none: mount an HF hub cache holding the model and drafter";
    }
    // (if source == null then { } else { "org.opencontainers.image.source" = source; });
}
