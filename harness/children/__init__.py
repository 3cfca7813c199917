"""Reference children of the engine protocol (docs/engine-protocol.md): Python and Node.js.

May import: `harness.subjects` (the protocol's records), `harness.environment` (the child's memory cap).
"""
