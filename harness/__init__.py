"""The instrument: drives llama.cpp as the oracle and holds `tokenizer` (or any engine) to it."""
