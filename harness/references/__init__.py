"""The model's original tokenizer as a second truth beside llama.cpp.

This package owns everything about a *reference*: the original `tokenizer.json`
or SentencePiece model a GGUF was converted from, run by its own library.

    specs.py      `hf:PATH`, `spm:PATH`, `tekken:PATH`: parsed, checked, started as a contained child
    hf.py         the `tokenizers` reference engine (runs in the child)
    spm.py        the `sentencepiece` reference engine (runs in the child)
    tekken.py     the `mistral-common` tekken reference engine (runs in the child)
    added.py      the original's own special and added token texts (boundary cases with --reference)
    original.py   the original's rules as plain data (normalizer, split patterns, added tokens' flags, BOS/EOS
                  policy, vocabulary words), for the cases derived from it (harness.inputs.derived)
    flags.py      llama.cpp's flags mapped onto each library, and what cannot be expressed
    classify.py   the three-way classification of one case, and the `summary.reference` counts (pure)
    decoding.py   the original's decode of llama.cpp's ids against llama.cpp's detokenize (the `decode` request)
    gguf_keys.py  cheap checks of a GGUF's tokenizer keys against the reference
    cause_candidates.py  the changes that might explain a conversion finding, read from the two files
    causes.py     each conversion finding's cause by experiment: the smallest change that makes it agree
    class_experiments.py  the class of a difference no key explains (Unicode version, model type, normalizer;
                  segmentation only or normalization), by experiment
    llama_facts.py  llama.cpp's loader retyping lists and Unicode tables, read from its pinned sources

May import: `tokenizer` (a GGUF's keys and token table, llama.cpp's flags per pre name, GPT-2's
byte table), `harness.environment` (the child's environment and memory cap), `harness.errors`,
`harness.files`, `harness.golden.records` (a record's exact bytes), `harness.subjects.client`,
`harness.subjects.protocol`, `harness.subjects.records` (the engine protocol's client side),
`harness.models.convert` (the converter's decision, in `pre_check`), `harness.models.shipped` (the
pinned llama.cpp sources in the cache, in `llama_facts`), `harness.models.folder_data` (a
folder's tokenizer files read, bounded), `harness.models.folder_files` (a folder's files read inside
it, and the private copy the child loads), `harness.models.summary` (a GGUF's NaN and infinite
values), `harness.oracle.session` and `harness.models.gguf_rewrite`
(in `causes`: llama.cpp asked again on a rewritten GGUF).
`tokenizers`, `sentencepiece` and `mistral-common` (the `[reference]` extra) are
imported only inside the child process that runs a reference, so a crash or a
hang there costs one case. It never imports the run's own modules
(`harness.runs`, `harness.report`): the per-model check wires it in, not the
other way round. docs/references.md has the flag mapping and the classes.
"""
