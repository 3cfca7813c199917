"""Chat: conversations rendered and tokenized, ours against llama.cpp's.

Owns the targets and cases (cases), the message-level comparison (diff), the chat golden
(golden), llama.cpp's chat formatting through the helper (oracle; helper/main.cpp, built by
helper_build), the conversation strategies (strategies) and the message-level run (run); and the
third side, the original's own templates (original) rendered by transformers in a bounded child
(transformers_child, transformers_side), compared three ways (three_way) with a class per
difference (message_classes), on the real set's originals given their templates (real_chat).
May import: `harness.report`, `harness.compare` (the token-level diff rows), `harness.models`,
`harness.files`, `harness.contained`, `harness.environment`, `harness.environment_vars`, `harness.errors`, `tokenizer`.
"""
