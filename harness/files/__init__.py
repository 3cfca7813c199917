"""Files: written whole or not at all (atomic), JSON Lines (jsonl), and limits on what is read (input_limits).

Owns the harness's file formats at the byte level. May import: the standard library only.
"""
