"""Chat: conversations rendered and tokenized, ours against llama.cpp's.

Owns the targets and cases (cases), the message-level comparison (diff), the chat golden
(golden), llama.cpp's chat formatting through the helper (oracle; helper/main.cpp, built by
helper_build), the conversation strategies (strategies) and the message-level run (run).
May import: `harness.report`, `harness.compare` (the token-level diff rows), `harness.models`,
`harness.files`, `harness.contained`, `harness.errors`, `tokenizer`.
"""
