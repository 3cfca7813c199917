"""Files: written whole or not at all (atomic), JSON Lines (jsonl), limits on what is read
(input_limits), and protobuf's wire format (protobuf).

Owns the harness's file formats at the byte level. May import: nothing of the project (the standard library only).
"""
