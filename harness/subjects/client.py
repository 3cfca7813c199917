"""The harness's side of the engine protocol: a child process as a contained engine handle.

`RemoteEngine` starts the child (`--engine cmd:...`, or the Python reference
child for `--engine MODULE:CALLABLE`), says `hello`, then asks for cases in
batches and for the vocabulary in slices (docs/engine-protocol.md). A child
that dies, hangs past the timeout or answers out of protocol is killed with
its whole process group (`harness.contained`) and restarted, and the failed
batch is replayed one case per request, so the engine error lands on the case
that causes it; a failure a fresh child does not repeat is an engine flake
(`RemoteEngine`, docs/engine-protocol.md "Blame").
"""

from __future__ import annotations

import binascii
import json
import time
from pathlib import Path

from ..contained import Contained, signal_name
from ..golden.records import FLAGS, output_field
from ..inputs.corpus import case_input
from . import wire
from .capabilities import SPECIAL_FLAGS, CapabilityError, declared, special_ids
from .guard import EngineLoadError
from .protocol import PROTOCOL, TOKENIZE_BATCH, VOCAB_SLICE, unb64
from .records import (
    NOT_APPLICABLE,
    EngineError,
    NotApplicable,
    engine_input,
    offered_fields,
    vocab_from_columns,
)
from .stderr_tail import StderrTail

STDERR_TAIL = 2000
TIMEOUT_BYTES = 64 << 10  # input bytes per --engine-timeout in one tokenize request (documents take longer)
MAX_RESTARTS = 3
MAX_FAILED_IN_A_ROW = 8  # cases failed in a row (each re-checked) before the engine is given up
SHUTDOWN_WAIT = 5.0


class ChildFailure(Exception):
    """A request that got no valid reply: the child died, hung or broke the protocol."""


class Child:
    """One child process: a request, then its one reply line, under a deadline.

    The child and everything it starts are one process group (`harness.contained`):
    its exit is noticed at once, not at an end of file a grandchild may hold back,
    and a kill or close ends the whole group.
    """

    def __init__(self, argv: list[str], env: dict[str, str] | None = None, memory: int | None = None) -> None:
        self.stderr = StderrTail()  # lives as long as the child; closed in close()
        try:
            self.contained = Contained(argv, env=env, stderr=self.stderr.fd, memory=memory)
        except OSError as exc:
            self.stderr.close()
            raise EngineLoadError(f"EngineLoadError: cannot start {argv[0]}: {exc.strerror or exc}") from None
        self.stderr.handed_over()
        self.proc = self.contained.proc
        self.next_id = 0

    def request(self, message: dict, timeout: float) -> dict:
        """The reply to `message`, or `ChildFailure` naming what went wrong.

        The reply line is bounded (`wire.read_line`): by the deadline, partial lines included,
        and by `wire.reply_limit` of the request's size; either way the child's group is killed.
        """
        self.next_id += 1
        mark = self.stderr.mark()
        deadline = time.monotonic() + timeout  # the write and the reply both: a child that does not read is late
        data = (json.dumps({**message, "id": self.next_id}) + "\n").encode()
        # a child that died no longer reads: the read below finds it over and says how
        self.contained.write(data, deadline)
        line = self._line(deadline, timeout, mark, wire.reply_limit(len(data)))
        try:
            reply = wire.parse(line)
        except ValueError:
            raise ChildFailure(f"engine process broke the protocol: not JSON: {line[:200]!r}") from None
        if not isinstance(reply, dict) or type(reply.get("id")) is not int or reply["id"] != self.next_id:
            raise ChildFailure(f"engine process broke the protocol: expected a reply with id {self.next_id}, "
                               f"got {wire.clean_text(reply, 200)}")
        return reply

    def _line(self, deadline: float, timeout: float, mark: int, limit: int) -> bytes:
        try:
            return wire.read_line(self.contained, deadline, limit)
        except wire.Late as late:
            self.kill()
            partial = f" ({late} of a reply line came)" if late.partial else ""
            raise ChildFailure(f"engine hung: no reply within {timeout:g}s{partial} (killed and restarted)"
                               + self._tail(mark)) from None
        except wire.LineTooLong as long:
            self.kill()
            raise ChildFailure(f"engine process broke the protocol: {long} (killed and restarted)"
                               + self._tail(mark)) from None
        except wire.Gone:
            raise ChildFailure(self._death() + self._tail(mark)) from None

    def _death(self) -> str:
        exited = self.contained.wait_exit(SHUTDOWN_WAIT)
        code = self.contained.stop()  # its whole group: a grandchild holding the pipe goes too
        if not exited:
            return "engine process closed its stdout mid-request (killed and restarted)"
        if code < 0:
            return f"engine process was killed by {signal_name(code)} mid-request"
        return f"engine process exited with status {code} mid-request"

    def _tail(self, mark: int) -> str:
        text = self.stderr.since(mark, STDERR_TAIL).decode("utf-8", "replace").strip()
        return f"; stderr: {text}" if text else ""

    def kill(self) -> None:
        """SIGKILL the child's whole process group, even when the child itself is gone, and reap it."""
        self.contained.stop()

    def close(self) -> None:
        if not self.contained.stopped and not self.contained.exited():
            try:
                self.request({"op": "shutdown"}, SHUTDOWN_WAIT)
                self.contained.wait_exit(SHUTDOWN_WAIT)
            except ChildFailure:
                pass
        self.contained.close()
        self.stderr.close()


def _error(obj: object, capability: str = "tokenize") -> EngineError:
    """An EngineError from a protocol error object (or whatever the child sent instead)."""
    return EngineError(*wire.error_text(obj), capability)


class RemoteEngine:
    """An engine handle (see `harness.subjects.guard`) served by a child process.

    Blame: a request the child fails (it hangs, exits or breaks the protocol) is
    asked again of a fresh child, one case at a time. Failing again, it is an engine
    error; answered, the answer is used and an *engine flake* is kept in `flakes`
    (`flake_record`): the engine under test failed once on that input, which is a
    finding about it (a race, a deadlock, state leaking between calls), not about
    the harness. A batch that failed while each of its cases then answered alone
    is one flake naming all the batch's case ids. After `MAX_FAILED_IN_A_ROW`
    cases failed in a row (each re-checked), the engine is given up on: the rest
    are engine errors naming the last failure, so a child that dies on every
    request cannot stretch the run without bound.
    """

    def __init__(self, argv: list[str], path: Path, *, args: dict[str, str], timeout: float,
                 env: dict[str, str] | None = None, memory: int | None = None) -> None:
        self.argv, self.path, self.args, self.timeout, self.env = argv, Path(path).resolve(), args, timeout, env
        self.memory = memory  # a `cmd:` program's heap cap (a Python child caps itself)
        self.load_timeout = max(timeout * 4, 120.0)
        self.dead: str | None = None
        self.columns: dict[str, list] = {}
        self.flakes: list[dict] = []
        self.failed_in_a_row = 0
        try:
            self.child = self._start()
        except _HelloFailed as first:  # re-checked once; failing again is the load error
            self.child = self._start()
            self._flake(["<load>"], "hello", first.failure)

    def _start(self) -> Child:
        child = Child(self.argv, self.env, self.memory)
        try:
            reply = child.request({"op": "hello", "protocol": PROTOCOL, "model": str(self.path),
                                   "args": self.args}, self.load_timeout)
        except ChildFailure as failure:
            child.close()
            raise _HelloFailed(str(failure)) from None
        if not reply.get("ok"):
            child.close()
            raise EngineLoadError(_error(reply.get("error")).error)
        try:
            self._accept(reply)
        except (CapabilityError, ValueError, TypeError) as exc:
            child.close()
            raise EngineLoadError(f"EngineLoadError: bad hello reply: {exc}") from None
        return child

    def _accept(self, reply: dict) -> None:
        if reply.get("protocol") != PROTOCOL:
            raise ValueError(f"the child speaks protocol {reply.get('protocol')!r}, the harness {PROTOCOL}")
        self.caps = declared(reply.get("capabilities") or ())
        info = reply.get("info") or {}
        if not isinstance(info, dict):
            raise TypeError("info is not an object")
        self.info = info
        self.id_bound: int | None = None  # the engine's own n_tokens: its ids are below it
        if offered_fields(self.caps):
            bad = wire.n_tokens_problem(info.get("n_tokens"))
            if bad:
                raise ValueError(f"per-token capabilities need info.n_tokens: {bad}")
            self.id_bound = info["n_tokens"]

    def _restart(self, reason: str) -> None:
        self.child.close()
        hello: list[str] = []  # hello failures of fresh children: a later one that answers makes them flakes
        for _ in range(MAX_RESTARTS):
            try:
                self.child = self._start()
            except _HelloFailed as exc:
                reason = str(exc)
                hello.append(exc.failure)
                continue
            except EngineLoadError as exc:
                reason = str(exc)
                continue
            for failure in hello:
                self._flake(["<load>"], "hello", failure)
            return
        self.dead = f"engine process could not be restarted after: {reason}"

    def _flake(self, case_ids: list[str], op: str, first: str) -> None:
        self.flakes.append(flake_record(case_ids, op, first))

    # --- cases ---------------------------------------------------------------------------------

    def evaluate_one(self, case: dict) -> dict | EngineError | NotApplicable:
        return self.evaluate_many([case])[0]

    def evaluate_many(self, cases: list[dict]) -> list[dict | EngineError | NotApplicable]:
        out: list = [None] * len(cases)
        todo = []
        for index, case in enumerate(cases):
            data = case_input(case)
            if isinstance(engine_input(self.caps, data), NotApplicable):
                out[index] = NOT_APPLICABLE
            else:
                todo.append((index, case, data))
        for start in range(0, len(todo), TOKENIZE_BATCH):
            batch = todo[start:start + TOKENIZE_BATCH]
            for (index, _, _), got in zip(batch, self._batch(batch), strict=True):
                out[index] = got
        return out

    def _batch(self, batch: list) -> list:
        """Each case's outcome; a failed request is re-checked case by case in fresh children."""
        if self.dead:
            return [EngineError(f"EngineDead: {self.dead}", "") for _ in batch]
        try:
            results = self._ask(batch)
        except _Refused as refused:
            if len(batch) > 1:
                return [self._batch([item])[0] for item in batch]
            return [_error(refused.error)]
        except ChildFailure as failure:
            self._restart(str(failure))
            if len(batch) == 1:
                return [self._recheck(batch[0], str(failure))]
            flakes = len(self.flakes)
            out = [self._batch([item])[0] for item in batch]
            # no case failed the process again (an engine error the engine *answered* does not explain it)
            repeated = any(isinstance(o, EngineError) and o.error.startswith("EngineProcess:") for o in out)
            if not self.dead and len(self.flakes) == flakes and not repeated:
                self._flake([str(case["id"]) for _, case, _ in batch], "tokenize", str(failure))
            return out
        self.failed_in_a_row = 0
        return [self._case(case, data, items) for (_, case, data), items in zip(batch, results, strict=True)]

    def _ask(self, batch: list) -> list:
        """The child's results for `batch`; `ChildFailure` or `_Refused` when it gave none."""
        request = {"op": "tokenize", "inputs": [_b64(data) for _, _, data in batch], "flags": [list(f) for f in FLAGS]}
        if "detokenize" in self.caps:
            request["detokenize"] = [list(f) for f in FLAGS]
        size = sum(len(data) for _, _, data in batch)  # a long document gets --engine-timeout per 64 KiB
        reply = self.child.request(request, self.timeout * max(1.0, size / TIMEOUT_BYTES))
        if not reply.get("ok"):
            raise _Refused(reply.get("error"))
        results = reply.get("results")
        if not isinstance(results, list) or len(results) != len(batch):
            raise ChildFailure(f"engine process broke the protocol: {len(batch)} inputs, "
                               f"results {wire.describe(results)}")
        return results

    def _recheck(self, item: tuple, first: str) -> dict | EngineError:
        """One case the child failed on, asked again of the fresh child: its answer and a flake, or the error."""
        _, case, data = item
        if self.dead:
            return EngineError(f"EngineProcess: {first}; re-check: {self.dead}", "")
        try:
            (items,) = self._ask([item])
        except _Refused as refused:  # it answered, with an error object: the engine's own answer
            self._flake([str(case["id"])], "tokenize", first)
            return _error(refused.error)
        except ChildFailure as again:
            self._restart(str(again))
            self.failed_in_a_row += 1
            if self.failed_in_a_row >= MAX_FAILED_IN_A_ROW and not self.dead:
                self.dead = (f"{self.failed_in_a_row} cases in a row failed in the engine process, each "
                             f"re-checked in a fresh one; the last: {again}")
            return EngineError(f"EngineProcess: {first}; re-checked in a fresh process: {again}", "")
        self.failed_in_a_row = 0
        self._flake([str(case["id"])], "tokenize", first)
        return self._case(case, data, items)

    def _case(self, case: dict, data: bytes, items: object) -> dict | EngineError:
        if not isinstance(items, list) or len(items) != len(FLAGS):
            return EngineError(f"ProtocolError: expected {len(FLAGS)} results for the case, got {str(items)[:200]}", "")
        encode = []
        for (add_special, parse_special), item in zip(FLAGS, items, strict=True):
            if not isinstance(item, dict) or "error" in item or "ids" not in item:
                return _error(item.get("error") if isinstance(item, dict) else item)
            ids = item["ids"]
            bad = wire.ids_problem(ids, size=len(data), n_tokens=self.id_bound)
            if bad:
                return EngineError(f"ContractError: tokenize (add_special={add_special}, "
                                   f"parse_special={parse_special}): {bad}", "")
            entry: dict = {"add_special": add_special, "parse_special": parse_special, "ids": ids}
            if "detokenize" in self.caps:
                entry.update(_detok_entry(item.get("detokenize")))
            encode.append(entry)
        return {"id": case["id"], **output_field(data), "encode": encode}

    def call(self, message: dict) -> dict:
        """The reply to one request of another op (a reference's `decode`), under `--engine-timeout`.

        A child that fails it (hangs, exits, breaks the protocol) is restarted and `ChildFailure`
        raised; the caller decides what the failure costs (`harness.references.decoding`).
        """
        if self.dead:
            raise ChildFailure(self.dead)
        try:
            return self.child.request(message, self.timeout)
        except ChildFailure as failure:
            self._restart(str(failure))
            raise

    # --- vocabulary ----------------------------------------------------------------------------

    def vocab(self) -> dict | EngineError:
        """The vocabulary, in slices; a child failing on it is re-checked once in a fresh child."""
        try:
            return self._vocab()
        except ChildFailure as failure:
            self._restart(str(failure))
            if self.dead:
                return EngineError(f"EngineProcess: {failure}", "", "vocabulary")
            first = str(failure)
        try:
            got = self._vocab()
        except ChildFailure as again:
            self._restart(str(again))
            return EngineError(f"EngineProcess: {first}; re-checked in a fresh process: {again}", "",
                               "vocabulary")
        self._flake(["<vocab>"], "vocabulary", first)
        return got

    def _vocab(self) -> dict | EngineError:
        """The vocabulary record; a child claiming more tokens than the GGUF holds is not asked for
        them: its record then holds its `n_tokens` and flags only, a difference in `n_tokens`."""
        fields = offered_fields(self.caps)
        n = self.info.get("n_tokens", 0) if fields else 0
        try:
            info = wire.checked_info(self.info, self.caps, special_ids(), SPECIAL_FLAGS)
            held = _gguf_tokens(self.path) if n else None
            if n > (wire.MAX_TOKENS if held is None else held):
                return vocab_from_columns(info, {})
            columns: dict[str, list] = {f: [] for f in fields}
            for start in range(0, n, VOCAB_SLICE):
                count = min(VOCAB_SLICE, n - start)
                reply = self.child.request({"op": "vocab", "start": start, "count": count, "fields": fields},
                                           self.load_timeout)  # a slice is 32k tokens' worth of calls
                if not reply.get("ok"):
                    return _error(reply.get("error"), "vocabulary")
                for field in fields:
                    columns[field] += wire.column(field, reply.get(field), start, count)
            self.columns = columns
            return vocab_from_columns(info, columns)
        except (ValueError, TypeError, binascii.Error) as exc:
            return EngineError(f"ProtocolError: {exc}", "", "vocabulary")

    # display only: values fetched by `vocab()`
    @property
    def n_tokens(self) -> int:
        return int(self.info["n_tokens"])

    def token_text(self, token: int) -> bytes:
        return self.columns["text"][token]

    def token_attr(self, token: int) -> int:
        return self.columns["attr"][token]

    def token_to_piece(self, token: int, *, special: bool) -> bytes:
        return self.columns["piece_special" if special else "piece"][token]

    def close(self) -> None:
        self.child.close()


def flake_record(case_ids: list[str], op: str, first: str) -> dict:
    """An engine flake: the child failed on `op` for `case_ids`, a fresh child answered (report.json's
    `engine_flakes`, without the "model" the run adds)."""
    if len(case_ids) > 1:
        recheck = (f"the failed request held {len(case_ids)} cases; each, asked alone of a fresh engine process, "
                   "was answered (which one set the failure off is not known): those answers are used")
    else:
        recheck = "a fresh engine process answered: the answer is used; the first failure did not repeat"
    return {"case_ids": list(case_ids), "op": op, "first": first, "recheck": recheck}


class _HelloFailed(EngineLoadError):
    """The child failed at hello (hung, exited or broke the protocol): re-checked once."""

    def __init__(self, failure: str) -> None:
        super().__init__(f"EngineLoadError: {failure}")
        self.failure = failure


class _Refused(Exception):
    def __init__(self, error: object) -> None:
        super().__init__(str(error)[:200])
        self.error = error


def _b64(data: bytes) -> str:
    import base64
    return base64.b64encode(data).decode("ascii")


def _detok_entry(values: object) -> dict:
    if not isinstance(values, list) or len(values) != len(FLAGS):
        return {"detokenize_error": {"error": "ProtocolError: expected 4 detokenizations, got "
                                              f"{wire.describe(values)}", "traceback": ""}}
    out = []
    for (remove_special, unparse_special), value in zip(FLAGS, values, strict=True):
        if isinstance(value, dict):
            error = _error(value.get("error", value), "detokenize")
            return {"detokenize_error": {"error": error.error, "traceback": error.traceback}}
        try:
            data = unb64(value)
        except (TypeError, binascii.Error) as exc:
            return {"detokenize_error": {"error": f"ProtocolError: detokenize (remove_special={remove_special}, "
                                                  f"unparse_special={unparse_special}): {exc}", "traceback": ""}}
        out.append({"remove_special": remove_special, "unparse_special": unparse_special, **output_field(data)})
    return {"detokenize": out}


def _gguf_tokens(path: Path) -> int | None:
    """How many tokens the GGUF at `path` holds (`tokenizer.ggml.tokens`), or None when it cannot be read."""
    from tokenizer import GGUFError
    from tokenizer.gguf import reader

    try:
        tokens = reader.read(path, metadata_only=True, lazy_strings=True).metadata.get("tokenizer.ggml.tokens")
    except (GGUFError, OSError):
        return None
    return len(tokens) if isinstance(tokens, (list, reader.StringArray)) else None
