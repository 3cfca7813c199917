"""Files: written whole or not at all (atomic), JSON Lines (jsonl), limits on what is read
(input_limits), and protobuf's wire format (protobuf).

Owns the harness's file formats at the byte level. May import: `harness.errors`
(`SetupError`, for an output path that cannot be written), nothing else of the project.
"""
