"""Child processes contained as a whole tree: a session of their own, killed and reaped as a group.

Every child the harness talks to over a pipe (engine children of `harness.subjects.client`,
llama.cpp workers of `harness.oracle.workers`, the chat helper of `harness.chat.oracle`, the
import check of `harness.subjects.spec`) is a `Contained`:

- it starts in a new session (`start_new_session=True`), so it and everything it starts
  share one process group, whose id is the child's pid;
- a read waits for the child's stdout *and* for its exit (a pidfd in the same `select`,
  on Linux; elsewhere `select` in short slices with a look at the process between them),
  so a child that exits is noticed at once, even when a grandchild it started still holds
  the pipe open and no end of file will ever come;
- a write waits the same way, under the request's deadline (stdin is non-blocking), so a
  child that does not read (hung, or gone while a grandchild holds its stdin) cannot stall
  the harness on a request larger than the pipe's buffer;
- `stop()` always SIGKILLs the whole group, even when the leader has already exited (its
  descendants live on otherwise), and then reaps the leader;
- with `memory=BYTES`, any program (a `cmd:` engine too) starts under
  `harness.environment.exec_bounded`: its heap capped (RLIMIT_DATA, lowered to an inherited
  limit, never raised) and killed by the kernel when this process dies (PR_SET_PDEATHSIG).

The leader's exit is watched without reaping it (`waitid(..., WNOWAIT)`) until the group
has been killed, so the group id cannot be reused by an unrelated process in between.
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import time
from typing import IO, Any

from .environment import bounded_argv, child_env

POLL_SLICE = 0.05  # seconds between looks at the process where there is no pidfd


def signal_name(code: int) -> str | None:
    """The signal that ended a process with exit status `code` (negative, as Popen gives it), or None."""
    if code >= 0:
        return None
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"SIG{-code}"


def _pidfd(pid: int) -> int | None:
    try:
        return os.pidfd_open(pid)  # type: ignore[attr-defined,unused-ignore]  # Linux 5.3+, Python 3.9+
    except (AttributeError, OSError):
        return None


class Contained:
    """One child process (stdin and stdout pipes) in a session of its own."""

    def __init__(self, argv: list[str], *, env: dict[str, str] | None = None, cwd: Any = None,
                 stderr: IO[bytes] | int | None = None, memory: int | None = None) -> None:
        if memory is not None:  # any program, its heap capped and tied to this process (`exec_bounded`)
            argv = bounded_argv(argv, memory)
            env = {**(env if env is not None else os.environ), "PYTHONPATH": child_env()["PYTHONPATH"]}
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr,
                                     env=env, cwd=cwd, start_new_session=True)
        self.pid = self.proc.pid  # also the process group's id
        self.pidfd = _pidfd(self.pid)
        self._in = self.proc.stdin.fileno()  # type: ignore[union-attr]
        os.set_blocking(self._in, False)  # `write` waits in select, under a deadline
        self.buffer = b""
        self.stopped = False

    @property
    def out(self) -> int:
        return self.proc.stdout.fileno()  # type: ignore[union-attr]

    def fds(self) -> list[int]:
        """What to `select` on for news from the child: its stdout, and its pidfd when there is one."""
        if self.stopped:
            return []
        return [self.out] + ([self.pidfd] if self.pidfd is not None else [])

    def write(self, data: bytes, deadline: float | None = None) -> bool:
        """Send `data` by `deadline` (time.monotonic(); None: no limit); False when the child no
        longer reads (it died, or exited: the next read says how).

        Never blocks past `deadline`: a child that does not read (hung, or gone while a grandchild
        holds its stdin) cannot stall the harness on a request larger than the pipe. True then,
        with the rest unsent: the read by the same deadline finds the child late.
        """
        view = memoryview(data)
        while view:
            if self.stopped or self.proc.stdin.closed:  # type: ignore[union-attr]  # (its fd may be reused)
                return False
            try:
                view = view[os.write(self._in, view):]
                continue
            except BlockingIOError:  # the pipe is full
                pass
            except OSError:  # EPIPE: nobody holds its stdin any more
                return False
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= 0:
                return True
            watch = [self.pidfd] if self.pidfd is not None else []
            wait = left if watch else min(left if left is not None else POLL_SLICE, POLL_SLICE)
            if select.select(watch, [self._in], [], wait)[0] or (self.pidfd is None and self.exited()):
                return False  # exited: a grandchild may hold its stdin, but nobody will answer
        return True

    def exited(self) -> bool:
        """Whether the leader has exited (not reaped: the group is killed first, in `stop()`)."""
        if self.proc.returncode is not None:
            return True
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:  # reaped by someone else (a test's proc.wait())
            return True

    def read(self, timeout: float) -> bytes | None:
        """The next bytes on stdout within `timeout` seconds (0: only what is there now).

        b"" when the child is over: it exited, or closed its stdout, and nothing it
        wrote is left unread. None when nothing came in time.
        """
        if self.stopped:
            return b""
        deadline = time.monotonic() + max(timeout, 0.0)
        while True:
            left = max(deadline - time.monotonic(), 0.0)
            wait = left if self.pidfd is not None else min(left, POLL_SLICE)
            ready = select.select(self.fds(), [], [], wait)[0]
            if self.out in ready:
                return os.read(self.out, 1 << 20)  # b"" is end of file
            if ready or (self.pidfd is None and self.exited()):
                # exited: what it wrote before is in the pipe already; a grandchild may hold it open
                if select.select([self.out], [], [], 0)[0]:
                    return os.read(self.out, 1 << 20)
                return b""
            if left <= 0:
                return None

    def readline(self, deadline: float) -> bytes | None:
        """One line (with its b"\\n") by `deadline` (time.monotonic()); b"" if the child is over; None if late."""
        while b"\n" not in self.buffer:
            chunk = self.read(deadline - time.monotonic())
            if chunk is None:
                return None
            if not chunk:
                return b""
            self.buffer += chunk
        line, _, self.buffer = self.buffer.partition(b"\n")
        return line + b"\n"

    def wait_exit(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the leader to exit (without reaping it); whether it did."""
        deadline = time.monotonic() + timeout
        while not self.exited():
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            if self.pidfd is not None:
                select.select([self.pidfd], [], [], left)
            else:
                time.sleep(min(left, POLL_SLICE))
        return True

    def stop(self) -> int:
        """SIGKILL the whole process group (always: the leader may be gone, its descendants not),
        reap the leader, and return its exit status (negative: the signal that ended it)."""
        if not self.stopped:
            self.stopped = True
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signal.SIGKILL)
            if self.pidfd is not None:
                os.close(self.pidfd)
                self.pidfd = None
        return self.proc.wait()

    def close(self, *, grace: float = 0.0) -> int:
        """End the child: EOF on its stdin, up to `grace` seconds to exit, then `stop()`; pipes closed."""
        if grace > 0 and not self.stopped and not self.exited():
            with contextlib.suppress(OSError):
                self.proc.stdin.close()  # type: ignore[union-attr]
            self.wait_exit(grace)
        code = self.stop()
        for stream in (self.proc.stdin, self.proc.stdout):
            with contextlib.suppress(OSError):
                if stream is not None:
                    stream.close()
        return code


def probe(argv: list[str], *, timeout: float, env: dict[str, str] | None = None,
          stderr: IO[bytes]) -> int | None:
    """Run `argv` to its end (stdin closed, stdout discarded, stderr to `stderr`), contained;
    its exit status, or None when it took over `timeout` seconds (then its group is killed)."""
    child = Contained(argv, env=env, stderr=stderr)
    try:
        with contextlib.suppress(OSError):
            child.proc.stdin.close()  # type: ignore[union-attr]
        deadline = time.monotonic() + timeout
        while not child.exited() and time.monotonic() < deadline:
            if child.read(deadline - time.monotonic()) == b"":  # drained, so it cannot block on stdout
                child.wait_exit(deadline - time.monotonic())  # stdout closed: wait for the exit itself
        done = child.exited()
        code = child.close()
        return code if done else None
    finally:
        child.close()
