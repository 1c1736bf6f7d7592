# The end-to-end GPU batteries as data: which server variant each check starts, which reference it is
# compared with, and the `bitexact` commands it runs (exit 0 = equal, 1 = differs, 2 = anything else).
# builtins only; nix/gpu-checks.nix turns each battery into a derivation that needs the `cuda` feature.
#
# One card holds one 27B server at the recipe's --mem-fraction-static, so a comparison of two server
# configurations cannot run both at once. The reference side (the `no-spec` variant) is recorded once
# per card as a derivation of its own (`bitexact golden record`, kept in the store), and each battery
# starts its variant's server and runs `bitexact golden check` against that record: the same bitwise
# comparison as `parity`, with the speculation requirement of the battery's variant.
#
# Placeholders in commands, filled by the glue: @URL@ (the running server), @RECIPE@ (recipe JSON),
# @REF@ (the reference record), @GOLDEN_DIR@ (checks/golden of the source), @OUT@ (reports),
# @MODEL_SNAPSHOT@ (the baked model's snapshot directory, for its tokenizer).
let
  # The author's receipts: 24 prompts (the shipped battery), 3 long prompts up to 128k, 1200 repeats.
  longLengths = "16k,64k,128k";
  repeats = 50;

  reference = long: {
    name = if long then "reference-no-spec-long" else "reference-no-spec";
    variant = "no-spec";
    commands = [
      (
        [
          "bitexact"
          "golden"
          "record"
          "@URL@"
          "--recipe"
          "@RECIPE@"
          "--variant"
          "no-spec"
          "--golden"
          "@OUT@/reference.json"
          "--out"
          "@OUT@/work"
        ]
        ++ (
          if long then
            [
              "--long"
              longLengths
              # Long prompts are drawn as text and tokenized on the client with the model's tokenizer.
              "--tokenizer"
              "@MODEL_SNAPSHOT@"
            ]
          else
            [ ]
        )
      )
    ];
  };

  checkAgainstReference = variant: [
    "bitexact"
    "golden"
    "check"
    "@URL@"
    "--recipe"
    "@RECIPE@"
    "--variant"
    variant
    "--golden"
    "@REF@"
    "--out"
    "@OUT@/${variant}"
    "--json"
  ];
in
rec {
  inherit longLengths repeats;

  references = {
    short = reference false;
    long = reference true;
  };

  # recipe (parsed) -> [{name, variant (server), reference (null | "short" | "long"), commands}]
  batteries =
    recipe:
    let
      has = v: recipe.variants ? ${v};
      need =
        v:
        if has v then
          true
        else
          throw "gpu-batteries: recipe ${recipe.name} has no variant '${v}' (the batteries need recipe, no-spec, forced-reject, inflight-8)";
      inflight = ((recipe.variants."inflight-8".client or { }).inflight or 1);
    in
    assert builtins.all need [
      "recipe"
      "no-spec"
      "forced-reject"
      "inflight-8"
    ];
    [
      {
        name = "gpu-parity-recipe";
        what = "speculation on (the recipe) equals speculation off, every token id and logprob";
        variant = "recipe";
        reference = "short";
        commands = [ (checkAgainstReference "recipe") ];
      }
      {
        name = "gpu-parity-forced-reject";
        what = "every draft rejected (verify and rollback on each step) still equals speculation off";
        variant = "forced-reject";
        reference = "short";
        commands = [ (checkAgainstReference "forced-reject") ];
      }
      {
        # The recipe's server with requests in flight: one request at a time equals no-spec, and
        # `inflight` at once equal one at a time, on the same server.
        name = "gpu-parity-inflight-8";
        what = "${toString inflight} requests in flight equal one at a time, which equals speculation off";
        variant = "recipe";
        reference = "short";
        commands = [
          (checkAgainstReference "recipe")
          [
            "bitexact"
            "parity"
            "@URL@"
            "@URL@"
            "--inflight-a"
            (toString inflight)
            "--inflight-b"
            "1"
            "--spec-a"
            "must"
            "--spec-b"
            "must"
            "--out"
            "@OUT@/inflight"
            "--json"
          ]
        ];
      }
      {
        name = "gpu-parity-long";
        what = "long prompts (${longLengths} tokens) with speculation equal speculation off";
        variant = "recipe";
        reference = "long";
        commands = [ (checkAgainstReference "recipe") ];
      }
      {
        name = "gpu-repeat";
        what = "${toString repeats} runs of every prompt, 8 in flight, give identical bits";
        variant = "recipe";
        reference = null;
        commands = [
          [
            "bitexact"
            "repeat"
            "@URL@"
            "--repeats"
            (toString repeats)
            "--batch"
            "8"
            "--out"
            "@OUT@/repeat"
            "--json"
          ]
        ];
      }
      {
        name = "gpu-golden";
        what = "the served bits equal this card's golden record (checks/golden/<card>/${recipe.name}.json)";
        variant = "recipe";
        reference = null;
        commands = [
          [
            "bitexact"
            "golden"
            "check"
            "@URL@"
            "--recipe"
            "@RECIPE@"
            "--variant"
            "recipe"
            "--golden-dir"
            "@GOLDEN_DIR@"
            "--out"
            "@OUT@/golden"
            "--json"
          ]
        ];
      }
    ];

  # Fill the placeholders of a command.
  fill =
    values: command:
    map (
      arg:
      builtins.replaceStrings
        [ "@URL@" "@RECIPE@" "@REF@" "@GOLDEN_DIR@" "@OUT@" "@MODEL_SNAPSHOT@" ]
        [
          values.url
          values.recipe
          (if (values.ref or null) == null then "@REF@" else values.ref)
          values.goldenDir
          values.out
          values.modelSnapshot
        ]
        arg
    ) command;
}
