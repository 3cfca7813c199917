"""`--engine SPEC` resolved for every kind, the original tokenizer included.

`harness.subjects.spec.load_engine` knows the engines under test: ours, MODULE:CALLABLE,
`cmd:` programs and the built-in peers. The model's original tokenizer (`hf:`, `spm:`,
`tekken:`; `harness.references`) sits a floor above the subjects, since its client is
built on theirs, so the one function that knows both kinds lives here, above both.
"""

from __future__ import annotations

from ..references.specs import is_reference, reference_factory
from ..subjects.spec import DEFAULT_ENGINE_TIMEOUT, EngineFactory
from ..subjects.spec import load_engine as load_subject


def load_engine(spec: str | None = None, *, args: dict[str, str] | None = None,
                timeout: float = DEFAULT_ENGINE_TIMEOUT) -> EngineFactory:
    """A factory GGUF path -> engine handle for `spec`, or `SetupError` saying why not."""
    if is_reference(spec):  # hf:, spm:, tekken: the original tokenizer, contained (docs/references.md)
        return reference_factory(str(spec), args=dict(args or {}), timeout=timeout)
    return load_subject(spec, args=args, timeout=timeout)
