"""VerifyStream: many requests over one bidirectional stream, each answered
through its own future (the server answers in completion order and tags
every answer with its request_id)."""

import itertools
import queue
import threading
import time
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
    send() may be called from any thread.

    ``resend_unanswered`` (0: off): when the stream ends UNAVAILABLE (a
    draining server ends its streams so after answering what it read; a
    lost connection does too; or CANCELLED not by ``cancel()``: gRPC's
    shutdown gives that to a stream that never reached the server), open a new stream, waiting for the server to
    be ready, and send on it, in their order, every request that got no
    answer or was refused UNAVAILABLE (not run: the drain had begun), then
    go on; the futures stay pending through it. At most that
    many new streams in a row without an answer between them; ``timeout``
    bounds the whole. ``reopened`` and ``resent`` count what it did.
    Verification is deterministic, so a resent request gets the answer the
    lost one would have; a KV handle made by a first attempt whose answer
    was lost expires by its TTL."""

    _ids = itertools.count()

    def __init__(self, stream_method, timeout=None, metadata=None, resend_unanswered=0):
        if resend_unanswered < 0:
            raise ValueError(f"resend_unanswered is {resend_unanswered}; must be >= 0")
        self._stream_method = stream_method
        self._metadata = metadata
        self._deadline = None if timeout is None else time.monotonic() + timeout
        self._reopens_allowed = resend_unanswered
        self._reopens_in_a_row = 0
        self._pending = {}  # request_id -> (future, request), in the order sent
        self._refusals = {}  # request_id -> the UNAVAILABLE message of a pending one
        self._lock = threading.Lock()
        self._closed = False
        self._cancelled = False
        self._final_error = None
        self.reopened = 0
        self.resent = 0
        self._queue = queue.SimpleQueue()
        self._call = stream_method(self._requests(self._queue), timeout=timeout, metadata=metadata)
        self._reader = threading.Thread(target=self._read, name="specverify-stream",
                                        daemon=True)
        self._reader.start()

    @staticmethod
    def _requests(source):
        while True:
            item = source.get()
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
            # Under the lock: a reopen moves what is pending to a new queue
            # at once, so a request is never left in a finished call's queue.
            self._queue.put(request)
        return future

    def _read(self):
        error = None
        try:
            while True:
                try:
                    for answer in self._call:
                        refused = (answer.WhichOneof("outcome") == "error" and answer.error.code
                                   == grpc.StatusCode.UNAVAILABLE.value[0])
                        with self._lock:
                            if refused and self._reopens_allowed > 0:
                                # Refused unrun (a drain that began after the
                                # stream read it): sent again once the
                                # draining stream ends.
                                if answer.request_id in self._pending:
                                    self._refusals[answer.request_id] = answer.error.message
                                continue
                            entry = self._pending.pop(answer.request_id, None)
                            self._reopens_in_a_row = 0
                        if entry is None:
                            continue  # not ours: cannot happen with a conforming server
                        future, request = entry
                        if answer.WhichOneof("outcome") == "response":
                            future.set_result(VerifyResult(answer.response, request))
                        else:
                            future.set_exception(VerifierError(
                                status_code_from_int(answer.error.code), answer.error.message,
                                "VerifyStream"))
                    error = None
                    break
                except grpc.RpcError as e:
                    error = from_rpc_error(e, "VerifyStream")
                    if not self._reopen_after(e):
                        break
        finally:
            with self._lock:
                self._closed = True
                self._final_error = error
                pending, self._pending = self._pending, {}
                refusals, self._refusals = self._refusals, {}
            for request_id, (future, _) in pending.items():
                if request_id in refusals:  # the server's own answer, kept for a resend
                    future.set_exception(VerifierError(grpc.StatusCode.UNAVAILABLE,
                                                       refusals[request_id], "VerifyStream"))
                    continue
                future.set_exception(error or VerifierError(
                    grpc.StatusCode.INTERNAL, "the stream ended before this request was answered",
                    "VerifyStream"))

    def _reopen_after(self, rpc_error):
        """A new call for what is unanswered, if resending allows one."""
        # CANCELLED too when not ours: gRPC's own shutdown gives it to calls
        # that never reached a handler (as the unary retry policy resends).
        if rpc_error.code() not in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED):
            return False
        with self._lock:
            if (self._cancelled or self._reopens_in_a_row >= self._reopens_allowed
                    or (self._closed and not self._pending)):
                return False
            attempt = self._reopens_in_a_row
        # A server that refuses at once (still draining, with no other
        # replica to go to) is not asked again at once.
        time.sleep(min(0.05 * 2 ** attempt, 1.0))
        with self._lock:
            remaining = None if self._deadline is None else self._deadline - time.monotonic()
            if self._cancelled or (remaining is not None and remaining <= 0):
                return False
            self._reopens_in_a_row += 1
            self.reopened += 1
            self.resent += len(self._pending)
            self._refusals = {}
            self._queue.put(_CLOSE)  # ends the finished call's request iterator
            self._queue = queue.SimpleQueue()
            for _, request in self._pending.values():
                self._queue.put(request)
            if self._closed:
                self._queue.put(_CLOSE)
            self._call = self._stream_method(self._requests(self._queue), timeout=remaining,
                                             metadata=self._metadata, wait_for_ready=True)
        return True

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
        with self._lock:
            self._cancelled = True
            call = self._call
            self._queue.put(_CLOSE)
        call.cancel()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None:
            self.cancel()
            self._reader.join()
            return False
        self.close()
        return False
