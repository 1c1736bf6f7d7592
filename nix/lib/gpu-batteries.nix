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
# @REF@ (the battery's reference record), @REF_LONG@ (the long reference, for a battery with
# `longReference = true`), @GOLDEN_DIR@ (checks/golden of the source), @OUT@ (reports),
# @MODEL_SNAPSHOT@ (the baked model's snapshot directory, for its tokenizer), @BUILD_INFO@ (the file
# `bitexact-server --build-info` wrote, for a golden's build identity).
#
# Capacity invariance: an exact server's answers must not move with the settings that size its batches
# (--max-running-requests, --chunked-prefill-size, and the CUDA graphs' batch sizes, which SGLang 0.5.20
# names --cuda-graph-max-bs-decode: its --cuda-graph-max-bs is gone). One battery per capacity
# variant of the recipe checks every answer against the same no-spec reference, with `capacityInflight`
# requests in flight so that the server does batch them; the chunked-prefill variants check the long
# prompts too (a prompt shorter than the chunk is never chunked).
#
# Prefix reuse: the `radix` variants (the recipe with --disable-radix-cache unset) run `bitexact warm`,
# which computes every prompt afresh with the cache flushed before it, then again with its prompt (or a
# shared prefix) taken from the cache, and compares the answers bit for bit. It refuses (exit 2) a warm
# pass in which any answer shows no cache hits (SGLang's meta_info.cached_tokens) and a cold pass in which
# any shows some, so none of these batteries can pass with the cache off or not hitting.
#
# What runs them is one program, `bitexact-gpu-checks run` (pkgs/gpu-checks), reading `plan recipe` as
# JSON: in the flake's GPU check (nix/gpu-checks-build.nix) and on a GPU host without Nix alike. Each
# battery also states what the released (stock) tree must do with it (`stock`: "differs", "passes" or
# "not-run"; the runner checks it on the stock tree), and `plan` adds to every step how many tokens each
# command's longest request holds at least (`commandNeeds`, from its --long and --shared-prefix lengths;
# the runner leaves out, with the reason, a command the server it starts cannot hold on the card).
let
  # The author's receipts: 24 prompts (the shipped battery), 3 long prompts up to 128k, 1200 repeats.
  longLengths = "16k,64k,128k";
  # What bitexact answers per prompt (its default --max-new-tokens), in tokens.
  newTokens = 64;

  # A length as bitexact reads it ("128k" = 131072, "1237"), and the longest of a comma-separated list.
  tokensOf =
    text:
    let
      k = builtins.match "([0-9]+)k" text;
    in
    if k != null then 1024 * builtins.fromJSON (builtins.head k) else builtins.fromJSON text;
  longestOf =
    text: builtins.foldl' (a: b: if a > b then a else b) 0 (map tokensOf (builtins.filter builtins.isString (builtins.split "," text)));
  # The option's value in a command, or null.
  valueOf =
    option: command:
    let
      at = builtins.filter (i: builtins.elemAt command i == option) (builtins.genList (i: i) (builtins.length command));
    in
    if at == [ ] then null else builtins.elemAt command (builtins.head at + 1);
  # At least how many tokens one request of the command holds (null: nothing long): its longest --long
  # prompt, or its --shared-prefix, plus the answer.
  needsOf =
    command:
    let
      long = valueOf "--long" command;
      prefix = valueOf "--shared-prefix" command;
    in
    if long != null then
      longestOf long + newTokens
    else if prefix != null then
      tokensOf prefix + newTokens
    else
      null;
  # A command that compares with the long reference holds the long prompts too.
  needsIn =
    step: command:
    let
      own = needsOf command;
      long =
        builtins.elem "@REF_LONG@" command || ((step.reference or null) == "long" && builtins.elem "@REF@" command);
    in
    if own != null then own else if long then needsOf (builtins.head (reference true).commands) else null;
  withNeeds = step: step // { commandNeeds = map (needsIn step) step.commands; };
  repeats = 50;
  capacityInflight = 32;
  # The capacity variants in the order the table shows them, with the server flag each changes (the
  # variant sets it; the recipe's own value is the baseline, checked by gpu-parity-recipe).
  capacity = [
    {
      variant = "max-running-1";
      flag = "--max-running-requests";
    }
    {
      variant = "max-seqs-32";
      flag = "--max-running-requests";
    }
    {
      variant = "chunked-prefill-4096";
      flag = "--chunked-prefill-size";
    }
    {
      variant = "chunked-prefill-16384";
      flag = "--chunked-prefill-size";
    }
    {
      variant = "cuda-graph-decode-bs-1";
      flag = "--cuda-graph-max-bs-decode";
    }
    {
      variant = "cuda-graph-decode-bs-32";
      flag = "--cuda-graph-max-bs-decode";
    }
  ];

  # A shared prefix aligned to no page, chunk or split size (all powers of two): an odd length. The
  # long prompt cached and then extended: at 64k (a multiple of the 8192-token prefill chunk) and one
  # token past it, each followed by `longQuestions` of the battery's prompts.
  sharedPrefix = "1237";
  longPrefixes = [
    "64k"
    "65537"
  ];
  longQuestions = 3;

  # `bitexact warm` against the running server of a radix variant, writing under @OUT@/<out>.
  warmCommand =
    variant: out: extra:
    [
      "bitexact"
      "warm"
      "@URL@"
      "--recipe"
      "@RECIPE@"
      "--variant"
      variant
    ]
    ++ extra
    ++ [
      "--out"
      "@OUT@/${out}"
      "--json"
    ];
  # The plain prompt set's commands leave out prompts of 64 tokens or fewer (sent, not compared): SGLang's
  # hybrid GDN cache matched in 64-token units only on the H200 (2026-12-02), so such a prompt never hits
  # and its warm pass would be refused. The shared-prefix commands are long and take no such option.
  plainPrompts = [
    "--min-prompt-tokens"
    "65"
  ];
  # The prefix and the questions are token ids: the model's own tokenizer makes them.
  sharedPrefixArgs = prefix: [
    "--shared-prefix"
    prefix
    "--tokenizer"
    "@MODEL_SNAPSHOT@"
  ];

  radixBattery = attrs: {
    variant = "radix";
    reference = null;
    radix = true;
    stock = "not-run";
  } // attrs;

  radixBatteries =
    inflight:
    map radixBattery [
      {
        name = "gpu-radix-cold-warm";
        what = "every prompt computed afresh, then twice from the cache (hits in every warm answer): equal bit for bit";
        # The released tree's cache moved answers on the H200 (24/42 equal, docs/e2e.md).
        stock = "differs";
        commands = [ (warmCommand "radix" "cold-warm" (plainPrompts ++ [ "--warm-passes" "2" ])) ];
      }
      {
        name = "gpu-radix-shared-prefix";
        what = "a shared prefix of ${sharedPrefix} tokens (aligned to no page, chunk or split size) cached, then different questions extending it: equal to each computed afresh";
        # The released tree passed it on the H200 (24/24, docs/e2e.md): the prefix alone moves no bits there.
        stock = "passes";
        commands = [ (warmCommand "radix" "shared-prefix" (sharedPrefixArgs sharedPrefix)) ];
      }
      {
        name = "gpu-radix-long-extend";
        what = "a 64k-token prompt cached, then extended by ${toString longQuestions} questions (at 65536 tokens and one past): equal to each computed afresh";
        commands = map (
          prefix:
          warmCommand "radix" "long-${prefix}" (
            sharedPrefixArgs prefix
            ++ [
              "--limit"
              (toString longQuestions)
            ]
          )
        ) longPrefixes;
      }
      {
        name = "gpu-radix-inflight-8";
        what = "${toString inflight} requests in flight: questions extending one cached prefix, and copies of each prompt from the cache";
        commands = [
          (warmCommand "radix" "shared-inflight" (
            sharedPrefixArgs sharedPrefix
            ++ [
              "--inflight"
              (toString inflight)
            ]
          ))
          (warmCommand "radix" "warm-inflight" (
            plainPrompts
            ++ [
              "--warm-passes"
              (toString inflight)
              "--inflight"
              (toString inflight)
            ]
          ))
        ];
      }
      {
        name = "gpu-radix-repeat";
        what = "every prompt computed afresh, then ${toString (repeats - 1)} times from the cache, 8 in flight: ${toString repeats} identical answers";
        commands = [
          (warmCommand "radix" "repeat" (
            plainPrompts
            ++ [
              "--warm-passes"
              (toString (repeats - 1))
              "--inflight"
              "8"
            ]
          ))
        ];
      }
      {
        # The card's goldens were recorded with the cache off (goldenRecord: the recipe variant); cold and
        # warm answers of the radix variant must equal them.
        name = "gpu-radix-golden";
        what = "cold and warm answers with the cache on equal this card's golden records, recorded with it off";
        commands = [
          (warmCommand "radix" "golden" (
            plainPrompts
            ++ [
              "--golden-dir"
              "@GOLDEN_DIR@"
            ]
          ))
          # every long prompt is far above 64 tokens: the option leaves none out, kept for one rule
          (warmCommand "radix" "golden-long" (
            plainPrompts
            ++ [
              "--golden-dir"
              "@GOLDEN_DIR@"
              "--long"
              longLengths
              "--tokenizer"
              "@MODEL_SNAPSHOT@"
            ]
          ))
        ];
      }
      {
        name = "gpu-radix-forced-reject";
        what = "every draft rejected over a prefix from the cache: cold then warm, and the shared prefix, equal bit for bit";
        variant = "radix-forced-reject";
        commands = [
          (warmCommand "radix-forced-reject" "cold-warm" plainPrompts)
          (warmCommand "radix-forced-reject" "shared-prefix" (sharedPrefixArgs sharedPrefix))
        ];
      }
    ];

  # `bitexact golden record` against the running server of one variant of the recipe.
  recordCommand = variant: [
    "bitexact"
    "golden"
    "record"
    "@URL@"
    "--recipe"
    "@RECIPE@"
    "--variant"
    variant
  ];

  reference = long: {
    name = if long then "reference-no-spec-long" else "reference-no-spec";
    variant = "no-spec";
    commands = [
      (
        recordCommand "no-spec"
        ++ [
          "--golden"
          "@OUT@/reference.json"
          "--no-history"
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

  # A reference is a scratch golden of this run: checks against it append to no history.
  checkAgainst = ref: out: variant: [
    "bitexact"
    "golden"
    "check"
    "@URL@"
    "--recipe"
    "@RECIPE@"
    "--variant"
    variant
    "--golden"
    ref
    "--no-history"
    "--out"
    out
    "--json"
  ];
  checkAgainstReference = variant: checkAgainst "@REF@" "@OUT@/${variant}" variant;

  capacityBattery =
    { variant, flag }:
    {
      name = "gpu-capacity-${variant}";
      what = "${flag} as ${variant} sets it, ${toString capacityInflight} requests in flight: every answer equals speculation off";
      inherit variant;
      reference = "short";
      longReference = flag == "--chunked-prefill-size";
      capacity = flag;
      stock = "not-run";
      commands = [
        (checkAgainstReference variant ++ [ "--inflight" (toString capacityInflight) ])
      ]
      ++ (
        if flag == "--chunked-prefill-size" then
          [ (checkAgainst "@REF_LONG@" "@OUT@/${variant}-long" variant) ]
        else
          [ ]
      );
    };
in
rec {
  inherit
    longLengths
    repeats
    needsOf
    capacityInflight
    capacity
    sharedPrefix
    longPrefixes
    ;

  references = {
    short = reference false;
    long = reference true;
  };

  # How a card's goldens are recorded (the runner's `record`: the record-golden app, and lab/card/host.sh
  # on a host without Nix): the recipe's server, the prompts, then the long prompts keyed `<recipe>-long`; gpu-golden checks
  # both. Each records a RECORDED line in the card's history beside the golden.
  goldenRecord = {
    variant = "recipe";
    commands =
      let
        record = recordCommand "recipe" ++ [
          "--golden-dir"
          "@GOLDEN_DIR@"
          "--build-info"
          "@BUILD_INFO@"
        ];
      in
      [
        record
        (
          record
          ++ [
            "--long"
            longLengths
            "--tokenizer"
            "@MODEL_SNAPSHOT@"
          ]
        )
      ];
  };

  # recipe (parsed) -> [{name, what, variant (server), reference (null | "short" | "long"), commands}],
  # capacity batteries with `capacity` (the flag) and `longReference` (also checked against @REF_LONG@),
  # prefix-reuse batteries with `radix = true`.
  batteries =
    recipe:
    let
      has = v: recipe.variants ? ${v};
      need =
        v:
        if has v then
          true
        else
          throw "gpu-batteries: recipe ${recipe.name} has no variant '${v}' (the batteries need recipe, no-spec, forced-reject, inflight-8, radix, radix-forced-reject and the capacity variants ${builtins.concatStringsSep ", " (map (c: c.variant) capacity)})";
      inflight = ((recipe.variants."inflight-8".client or { }).inflight or 1);
    in
    assert builtins.all need (
      [
        "recipe"
        "no-spec"
        "forced-reject"
        "inflight-8"
        "radix"
        "radix-forced-reject"
      ]
      ++ map (c: c.variant) capacity
    );
    [
      {
        name = "gpu-parity-recipe";
        what = "speculation on (the recipe) equals speculation off, every token id and logprob";
        variant = "recipe";
        reference = "short";
        # The released tree's verify differs from its decode (docs/e2e.md): speculation moves its answers.
        stock = "differs";
        commands = [ (checkAgainstReference "recipe") ];
      }
      {
        name = "gpu-parity-forced-reject";
        what = "every draft rejected (verify and rollback on each step) still equals speculation off";
        variant = "forced-reject";
        reference = "short";
        stock = "not-run";
        commands = [ (checkAgainstReference "forced-reject") ];
      }
      {
        # The recipe's server with requests in flight: one request at a time equals no-spec, and
        # `inflight` at once equal one at a time, on the same server.
        name = "gpu-parity-inflight-8";
        what = "${toString inflight} requests in flight equal one at a time, which equals speculation off";
        variant = "recipe";
        reference = "short";
        stock = "not-run";
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
        stock = "not-run";
        commands = [ (checkAgainstReference "recipe") ];
      }
      {
        name = "gpu-repeat";
        what = "${toString repeats} runs of every prompt, 8 in flight, give identical bits";
        variant = "recipe";
        reference = null;
        stock = "not-run";
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
        what = "the served bits equal this card's golden records (checks/golden/<card>/${recipe.name}.json and ${recipe.name}-long.json)";
        variant = "recipe";
        reference = null;
        stock = "not-run";
        commands =
          let
            check = out: [
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
              # The golden dir is in the store (read only): the check's history line goes to the output,
              # from where `bitexact history CARD --history result/history.jsonl` reads it.
              "--history"
              "@OUT@/history.jsonl"
              "--out"
              "@OUT@/${out}"
              "--json"
            ];
          in
          [
            (check "golden")
            # The long prompts key as `<recipe>-long` (a golden holds one prompt set).
            (
              check "golden-long"
              ++ [
                "--long"
                longLengths
                "--tokenizer"
                "@MODEL_SNAPSHOT@"
              ]
            )
          ];
      }
    ]
    ++ map capacityBattery capacity
    ++ radixBatteries inflight;

  # The kernel checks (checks/gpu) as the plan's first step: the runner selects them by the card and host
  # it reads (each check declares what it needs) and fails on a selected check that skips.
  kernels = {
    name = "gpu-kernels";
    what = "the kernel checks on the built, patched SGLang, selected by card and host, none skipped";
  };

  # What `bitexact-gpu-checks run --plan` reads (builtins.toJSON of it): the flake writes it for the
  # recipe it checks; a host without Nix reads the committed export (checks/plans/).
  plan = recipe: {
    schema = 1;
    recipe = recipe.name;
    inherit
      kernels
      goldenRecord
      longLengths
      repeats
      ;
    references = builtins.mapAttrs (_: withNeeds) references;
    batteries = map withNeeds (batteries recipe);
  };

  # The names of the plan's steps in the order the runner lists them (`bitexact-gpu-checks steps`): the
  # kernel step, the references, the batteries.
  stepNames =
    recipe:
    [
      kernels.name
      references.short.name
      references.long.name
    ]
    ++ map (b: b.name) (batteries recipe);

  # Fill the placeholders of a command.
  fill =
    values: command:
    map (
      arg:
      builtins.replaceStrings
        [ "@URL@" "@RECIPE@" "@REF@" "@REF_LONG@" "@GOLDEN_DIR@" "@OUT@" "@MODEL_SNAPSHOT@" "@BUILD_INFO@" ]
        [
          values.url
          values.recipe
          (if (values.ref or null) == null then "@REF@" else values.ref)
          (if (values.refLong or null) == null then "@REF_LONG@" else values.refLong)
          values.goldenDir
          values.out
          values.modelSnapshot
          (values.buildInfo or "@BUILD_INFO@")
        ]
        arg
    ) command;
}
