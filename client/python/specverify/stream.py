"""VerifyStream: many requests over one bidirectional stream, each answered
through its own future (the server answers in completion order and tags
every answer with its request_id)."""

import itertools
import queue
import threading
from concurrent.futures import Future

import grpc

from specverify.errors import VerifierError, from_rpc_error, status_code_from_int
from specverify.results import VerifyResult

_CLOSE = object()


class VerifyStream:
    """Open with Verifier.stream(). ``send(request)`` returns a
    concurrent.futures.Future of a VerifyResult (or of a VerifierError for
    that request alone: the stream goes on). ``close()`` half-closes the
    stream, waits for every answer and raises VerifierError if the stream
    itself ended with an error. Usable as a context manager. Thread-safe:
    send() may be called from any thread."""

    _ids = itertools.count()

    def __init__(self, stream_method, timeout=None, metadata=None):
        self._queue = queue.SimpleQueue()
        self._pending = {}
        self._lock = threading.Lock()
        self._closed = False
        self._final_error = None
        self._call = stream_method(self._requests(), timeout=timeout, metadata=metadata)
        self._reader = threading.Thread(target=self._read, name="specverify-stream",
                                        daemon=True)
        self._reader.start()

    def _requests(self):
        while True:
            item = self._queue.get()
            if item is _CLOSE:
                return
            yield item

    def send(self, request):
        if not request.request_id:
            request.request_id = f"stream-{next(VerifyStream._ids)}"
        future = Future()
        future.set_running_or_notify_cancel()
        with self._lock:
            if self._closed:
                raise VerifierError(grpc.StatusCode.FAILED_PRECONDITION,
                                    "the stream is closed", "VerifyStream")
            if request.request_id in self._pending:
                raise ValueError(f"request_id {request.request_id!r} is already in flight on "
                                 f"this stream")
            self._pending[request.request_id] = (future, request)
        self._queue.put(request)
        return future

    def _read(self):
        error = None
        try:
            for answer in self._call:
                with self._lock:
                    entry = self._pending.pop(answer.request_id, None)
                if entry is None:
                    continue  # not ours: cannot happen with a conforming server
                future, request = entry
                if answer.WhichOneof("outcome") == "response":
                    future.set_result(VerifyResult(answer.response, request))
                else:
                    future.set_exception(VerifierError(
                        status_code_from_int(answer.error.code), answer.error.message,
                        "VerifyStream"))
        except grpc.RpcError as e:
            error = from_rpc_error(e, "VerifyStream")
        finally:
            with self._lock:
                self._closed = True
                self._final_error = error
                pending, self._pending = self._pending, {}
            for future, _ in pending.values():
                future.set_exception(error or VerifierError(
                    grpc.StatusCode.INTERNAL, "the stream ended before this request was answered",
                    "VerifyStream"))

    def close(self, timeout=None):
        """Half-closes, waits for the server to end the stream, raises its
        error if it ended with one."""
        with self._lock:
            self._closed = True
        self._queue.put(_CLOSE)
        self._reader.join(timeout)
        if self._reader.is_alive():
            raise TimeoutError("VerifyStream: the server did not end the stream in time")
        if self._final_error is not None:
            raise self._final_error

    def cancel(self):
        """Cancels the call; unanswered requests fail with CANCELLED."""
        self._call.cancel()
        self._queue.put(_CLOSE)

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.cancel()
            self._reader.join()
            return False
        self.close()
        return False
