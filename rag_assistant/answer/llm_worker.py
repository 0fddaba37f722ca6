"""The LLM request of a one-off command (`ask`), made by a child process started when the command starts, so
that importing the `openai` client (~0.6 s of Python on these machines, a thousand pydantic models) runs on
another core while the parent loads the index and retrieves. Threads cannot do that: imports hold the GIL.

The child imports the client, then waits for one request on stdin: the settings (key included: a pipe, not
argv or the environment) and the two prompts. It runs the usual LLMClient (retries, error classification,
truncation check) and writes one JSON line per streamed piece, then the completion or the LLMError. The
parent relays them, so the answer, its streaming and its errors are the same as in process. A worker that
cannot start or ends before its first line is not an error: the client makes the request itself. It is
started only where a second core exists to run it on; it serves one request."""

from __future__ import annotations

import atexit
import json
import os
import subprocess
import sys
from collections.abc import Callable
from typing import Any

from rag_assistant.answer.llm_client import Completion, LLMClient
from rag_assistant.config import Settings
from rag_assistant.errors import LLMError


class WorkerGone(Exception):
    """The worker ended before it answered anything: the caller makes the request itself."""


class LLMWorker:
    """A child process that will make one LLM request; `start()` returns None where it would not help."""

    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        atexit.register(self.close)

    @classmethod
    def start(cls) -> LLMWorker | None:
        if (os.cpu_count() or 1) < 2:
            return None  # one core: the child's import would only take turns with the parent's work
        try:
            proc = subprocess.Popen(
                [sys.executable, "-m", "rag_assistant.answer.llm_worker"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                encoding="utf-8",
            )
        except OSError:
            return None
        return cls(proc)

    def run(self, settings: Settings, system: str, user: str, on_token: Callable[[str], None] | None) -> Completion:
        """The completion, streamed through on_token when given; LLMError as the client raises it; WorkerGone
        when the worker ended before answering anything."""
        request = {"settings": _revealed(settings), "system": system, "user": user, "stream": on_token is not None}
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write(json.dumps(request) + "\n")
            self.proc.stdin.close()
        except (OSError, ValueError) as exc:  # a broken pipe: the worker is gone
            self.close()
            raise WorkerGone from exc
        shown: list[str] = []
        try:
            for line in self.proc.stdout:
                try:
                    event = json.loads(line)
                except ValueError:
                    break  # not the worker's protocol: treat it as gone
                if "token" in event:
                    shown.append(event["token"])
                    if on_token is not None:
                        on_token(event["token"])
                elif "done" in event:
                    done = event["done"]
                    return Completion(done["text"], done["usage"], done["finish"])
                else:
                    error = event["error"]
                    raise LLMError(error["message"], error["hint"], reason=error["reason"])
        finally:
            self.close()
        if not shown:
            raise WorkerGone
        raise LLMError(
            f"the LLM request stopped after {sum(map(len, shown))} characters of the answer: its process ended",
            "retry; --mode extractive works offline",
            reason="dropped",
        )

    def close(self) -> None:
        """End the worker (it is idle or done)."""
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stdout):
            if pipe is not None and not pipe.closed:
                pipe.close()


class WorkerClient(LLMClient):
    """An LLMClient whose first request goes through the worker (or, when the worker is gone, is made here)."""

    def __init__(self, settings: Settings, worker: LLMWorker) -> None:
        super().__init__(settings)
        self._worker: LLMWorker | None = worker

    def _call(self, system: str, user: str, on_token: Callable[[str], None] | None) -> Completion:
        worker, self._worker = self._worker, None
        if worker is not None:
            try:
                return worker.run(self.settings, system, user, on_token)
            except WorkerGone:
                pass
        return super()._call(system, user, on_token)


def _revealed(settings: Settings) -> dict[str, Any]:
    """The settings as JSON values, secrets included (they go down a pipe to the worker only)."""
    from pydantic import SecretStr

    def value(v: Any) -> Any:  # noqa: ANN401 - any settings value
        return v.get_secret_value() if isinstance(v, SecretStr) else str(v)

    return json.loads(json.dumps(settings.model_dump(), default=value))


def _emit(event: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(event) + "\n")
    sys.stdout.flush()


def main() -> None:
    """The worker: import the client, then serve the one request read from stdin."""
    try:
        import openai  # noqa: F401 - what this process exists for: imported while the parent retrieves
        import openai.types.chat  # noqa: F401
    except ImportError:
        pass  # the client raises it again, as an answer to the request
    line = sys.stdin.readline()
    if not line.strip():
        return  # the parent needed no LLM (it abstained, or failed before asking)
    request = json.loads(line)
    client = LLMClient(Settings.model_validate(request["settings"]))
    on_token = (lambda piece: _emit({"token": piece})) if request["stream"] else None
    try:
        if on_token is None:
            completion = client.complete(request["system"], request["user"])
        else:
            completion = client.stream(request["system"], request["user"], on_token)
    except Exception as exc:  # noqa: BLE001 - reported to the parent as the client would report it
        failed = f"the LLM call failed: {type(exc).__name__}: {str(exc)[:200]}"
        error = exc if isinstance(exc, LLMError) else client.error("other", failed)
        return _emit({"error": {"message": error.message, "hint": error.hint, "reason": error.reason}})
    _emit({"done": {"text": completion.text, "usage": completion.usage, "finish": completion.finish}})


if __name__ == "__main__":
    main()
