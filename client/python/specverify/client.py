"""The Verifier client: requests from numpy arrays or torch tensors, unary
(blocking and futures), streaming, KV fetch/release, regions, server info and
health.

Tensors: every array argument may be a numpy array, a torch tensor (CPU or
CUDA) or a specverify.Typed array. A C-contiguous tensor whose bytes lie
inside a region registered through this Verifier travels as a TensorRef (the
offset is computed from its address); any other travels inline (a CUDA
tensor outside every region is copied to the host first).

Thread safety: a Verifier may be used from any number of threads at once
(the gRPC channel is thread-safe).
"""

import json
import threading
from concurrent.futures import Future

import grpc
import numpy as np

from specverify.client_id import check_client_id, is_unix_socket_target, new_client_id, METADATA_KEY
from specverify.errors import VerifierError, from_rpc_error
from specverify.regions import CudaRegion, ShmRegion, check_region_name
from specverify.results import KV_RETURN, VerifyResult
from specverify.stream import VerifyStream
from specverify.tensors import DTYPE_SIZES, describe, inline_tensor, tensor_ref, token_list
from specverify.v1 import verifier_pb2 as pb
from specverify.v1 import verifier_pb2_grpc as pb_grpc

_HEALTH_CHECK = "/grpc.health.v1.Health/Check"
_SERVING = 1  # grpc.health.v1.HealthCheckResponse.ServingStatus.SERVING

_DISTRIBUTION_KINDS = {
    "probabilities": pb.DISTRIBUTION_KIND_PROBABILITIES,
    "logits": pb.DISTRIBUTION_KIND_LOGITS,
    # Normalized log-probabilities (log_softmax rows, -inf = probability 0).
    "log_probabilities": pb.DISTRIBUTION_KIND_LOG_PROBABILITIES,
}
_METHODS = {
    "exact": pb.SAMPLING_METHOD_EXACT,
    "sigmoid": pb.SAMPLING_METHOD_SIGMOID_APPROXIMATION,
}


def _encode_varint(value):
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _health_request(service):
    # grpc.health.v1.HealthCheckRequest{service = 1}, encoded by hand: Debian
    # ships no Python health stubs, and generating our own would register
    # grpc.health.v1 in the default descriptor pool, where it collides with
    # grpcio-health-checking in a process that imports both.
    data = service.encode()
    return (b"\x0a" + _encode_varint(len(data)) + data) if data else b""


def _health_status(response):
    # HealthCheckResponse{status = 1 (enum, varint)}; absent means 0 (UNKNOWN).
    i, status = 0, 0
    while i < len(response):
        key = response[i]
        i += 1
        if key == 0x08:
            shift, status = 0, 0
            while True:
                byte = response[i]
                i += 1
                status |= (byte & 0x7F) << shift
                shift += 7
                if not byte & 0x80:
                    break
        else:
            raise VerifierError(grpc.StatusCode.INTERNAL,
                                f"unexpected field tag {key} in HealthCheckResponse", "Check")
    return status


def _is_single_token_list(x):
    """True when x is one sequence's token ids (1-D), False for a batch."""
    ndim = getattr(x, "ndim", None)
    if ndim is not None:
        if ndim not in (1, 2):
            raise ValueError(f"draft_tokens must be 1-D (one sequence) or 2-D / a list of "
                             f"sequences, got {ndim}-D")
        return ndim == 1
    x = list(x)
    return not x or np.ndim(x[0]) == 0


def _per_sequence(x, count, what):
    """``x`` split into ``count`` per-sequence items (a list, or an array or
    tensor indexed along its first dimension)."""
    if x is None:
        return [None] * count
    n = len(x)
    if n != count:
        raise ValueError(f"{what} has {n} sequences, draft_tokens {count}")
    return [x[i] for i in range(n)]


_VERIFIER_SERVICE = "specverify.v1.Verifier"


def default_service_config(verify_max_attempts=4, load_balancing_policy="", wait_for_ready=False):
    """The service config (JSON) a Verifier gives its channel unless the
    caller's ``options`` carry their own ``grpc.service_config``: Verify
    resent (gRPC's retries, within the call's timeout) when a replica
    refuses it before running it, UNAVAILABLE (draining, gone) or CANCELLED
    (gRPC's own shutdown gives that to calls that never reached a handler,
    grpc/grpc#41785); verification is deterministic, so a resent request
    gets the same answer. Under ``round_robin``, client-side health checking
    too, so a draining replica gets no new calls. With ``wait_for_ready``,
    every call waits (within its timeout) for a server to connect to instead
    of failing UNAVAILABLE at once while none can be reached. The C++
    client's DefaultServiceConfigJson gives the same."""
    verify = {"name": [{"service": _VERIFIER_SERVICE, "method": "Verify"}]}
    config = {"methodConfig": [verify]}
    if wait_for_ready:
        # The most specific name wins: Verify's entry carries it too.
        verify["waitForReady"] = True
        config["methodConfig"].insert(0, {"name": [{"service": _VERIFIER_SERVICE}], "waitForReady": True})
    if verify_max_attempts > 1:
        verify["retryPolicy"] = {
            "maxAttempts": verify_max_attempts,
            "initialBackoff": "0.01s",
            "maxBackoff": "0.2s",
            "backoffMultiplier": 2,
            "retryableStatusCodes": ["UNAVAILABLE", "CANCELLED"],
        }
    if load_balancing_policy == "round_robin":
        config["healthCheckConfig"] = {"serviceName": _VERIFIER_SERVICE}
    return json.dumps(config)


class Verifier:
    """A client of one specverify server.

    ``address``: "host:port" (or any gRPC target, e.g. "unix:/path").
    TLS: pass ``credentials`` (grpc.ssl_channel_credentials(...)) or the PEM
    bytes ``root_certificates`` (and for mutual TLS ``certificate_chain`` and
    ``private_key``); ``server_name`` overrides the name checked against the
    server's certificate. ``timeout``: seconds for calls that pass none.
    ``cuda_sync``: before a request naming CUDA memory is built, synchronize
    the current torch stream of that device, so that the server (another
    process, its own stream) reads what the worker's kernels wrote.
    ``verify_max_attempts``: attempts per Verify when a replica refuses it
    before running it (``default_service_config``); 1 turns retries off,
    gRPC allows at most 5. ``wait_for_ready``: calls wait, within their
    timeout, for a server to connect to instead of failing UNAVAILABLE at
    once while none can be reached: a worker beside a single server rides
    through its restart (off: a worker that falls back to verifying
    locally wants the fast failure). ``options``: more channel arguments, e.g.
    ``[("grpc.lb_policy_name", "round_robin")]`` for a ``dns:///`` name of
    several replicas, or a ``grpc.service_config`` of your own.
    ``client_id``: on a unix socket, where every client is the same peer to
    gRPC, the name its calls carry (the ``specverify-client-id`` header): the
    server's account for its per-client limits and batch turns. 1-128 of
    [A-Za-z0-9._:-]; None: "<host>-<pid>-<n>", one of its own for every
    Verifier (``self.client_id``). Verifiers that should share an account
    share the name. Unused over TCP, where the connection is the account;
    under mutual TLS the certificate is.
    """

    def __init__(self, address, *, credentials=None, root_certificates=None,
                 certificate_chain=None, private_key=None, server_name=None,
                 max_message_bytes=64 << 20, timeout=30.0, cuda_sync=True, verify_max_attempts=4,
                 wait_for_ready=False, options=(), client_id=None):
        if client_id is None:
            client_id = new_client_id()
        else:
            check_client_id(client_id)
        if not 1 <= verify_max_attempts <= 5:
            raise ValueError(f"verify_max_attempts is {verify_max_attempts}; must lie in [1, 5] "
                             "(gRPC's limit on attempts)")
        options = list(options)
        given = {name for name, _ in options}
        channel_options = [
            ("grpc.max_send_message_length", max_message_bytes),
            ("grpc.max_receive_message_length", max_message_bytes),
            # gRPC keeps a call's request for its retries only up to this size
            # (256 KiB by default): sampled requests with rows inline are larger.
            ("grpc.per_rpc_retry_buffer_size", max_message_bytes),
        ]
        if "grpc.service_config" not in given:
            policy = next((value for name, value in options if name == "grpc.lb_policy_name"), "")
            channel_options.append(("grpc.service_config",
                                    default_service_config(verify_max_attempts, policy, wait_for_ready)))
        if server_name:
            channel_options.append(("grpc.ssl_target_name_override", server_name))
        channel_options.extend(options)
        if credentials is None and (root_certificates or certificate_chain):
            credentials = grpc.ssl_channel_credentials(root_certificates, private_key,
                                                       certificate_chain)
        if credentials is not None:
            self._channel = grpc.secure_channel(address, credentials, channel_options)
        else:
            self._channel = grpc.insecure_channel(address, channel_options)
        self._stub = pb_grpc.VerifierStub(self._channel)
        self._health = self._channel.unary_unary(_HEALTH_CHECK)
        self.address = address
        self.client_id = client_id
        # Over TCP the calls carry nothing extra.
        self._metadata = ((METADATA_KEY, client_id),) if is_unix_socket_target(address) else None
        self.timeout = timeout
        self.cuda_sync = cuda_sync
        self._regions = {}
        self._regions_lock = threading.Lock()

    # ------------------------------------------------------------ lifetime --

    def close(self):
        """Unregisters and closes the regions registered here (best effort),
        then closes the channel."""
        with self._regions_lock:
            regions, self._regions = list(self._regions.values()), {}
        for region in regions:
            try:
                self._stub.UnregisterRegion(pb.UnregisterRegionRequest(name=region.name),
                                            timeout=self.timeout, metadata=self._metadata)
            except grpc.RpcError:
                pass
            region.close()
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        self.close()
        return False

    def _call(self, method, request, timeout, name):
        try:
            return method(request, timeout=self.timeout if timeout is None else timeout,
                          metadata=self._metadata)
        except grpc.RpcError as e:
            raise from_rpc_error(e, name) from None

    # ---------------------------------------------------------------- info --

    def server_info(self, timeout=None):
        """The server's ServerInfo message (backend, device, limits, modes,
        region kinds, regions)."""
        return self._call(self._stub.GetServerInfo, pb.GetServerInfoRequest(), timeout,
                          "GetServerInfo")

    def check_health(self, service="", timeout=None):
        """grpc.health.v1 Check: True when SERVING."""
        response = self._call(self._health, _health_request(service), timeout, "Check")
        return _health_status(response) == _SERVING

    def wait_until_serving(self, timeout=10.0):
        """Blocks until the channel connects and the server reports SERVING."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise VerifierError(grpc.StatusCode.UNAVAILABLE,
                                f"no connection to {self.address} within {timeout} s") from None
        if not self.check_health(timeout=timeout):
            raise VerifierError(grpc.StatusCode.UNAVAILABLE, f"{self.address} is not SERVING")

    # ------------------------------------------------------------- regions --

    def register_shm_region(self, name, byte_size, *, shm=None, shm_name=None, shm_offset=0,
                            timeout=None):
        """Creates a POSIX shared-memory object of ``byte_size`` bytes (or uses
        ``shm``, a multiprocessing.shared_memory.SharedMemory, from
        ``shm_offset``) and registers it as region ``name``. Returns the
        ShmRegion: carve arrays out of it with ``allocate()`` /
        ``ndarray()``."""
        if shm is None:
            region = ShmRegion.create(name, byte_size, shm_name)
        else:
            region = ShmRegion.attach(name, shm, byte_size)
        request = pb.RegisterRegionRequest(
            name=name, byte_size=byte_size,
            system=pb.SystemSharedMemory(shm_name=region.shm_name, offset_bytes=shm_offset))
        return self._register(region, request, timeout)

    def register_cuda_region(self, tensor, name=None, timeout=None):
        """Registers a contiguous torch CUDA tensor's memory as a region
        (CUDA IPC; see specverify.cuda_ipc). ``name`` defaults to one derived
        from the tensor's address. The region holds the tensor."""
        if name is None:
            name = f"cuda{tensor.device.index}-{tensor.data_ptr():x}"
        region = CudaRegion(name, tensor)
        request = pb.RegisterRegionRequest(
            name=name, byte_size=region.byte_size,
            cuda=pb.CudaIpcMemory(ipc_handle=region.ipc_handle,
                                  device_ordinal=region.device_index,
                                  offset_bytes=region.allocation_offset))
        return self._register(region, request, timeout)

    def _register(self, region, request, timeout):
        try:
            self._call(self._stub.RegisterRegion, request, timeout, "RegisterRegion")
        except BaseException:
            region.close()
            raise
        with self._regions_lock:
            self._regions[region.name] = region
        return region

    def unregister_region(self, region, timeout=None):
        """Unregisters ``region`` (a Region or its name); returns the number of
        requests still using it (the server unmaps it after them). Does not
        close the region: call region.close() when done with its memory."""
        name = region if isinstance(region, str) else region.name
        check_region_name(name)
        response = self._call(self._stub.UnregisterRegion, pb.UnregisterRegionRequest(name=name),
                              timeout, "UnregisterRegion")
        with self._regions_lock:
            self._regions.pop(name, None)
        return response.requests_in_flight

    def list_regions(self, timeout=None):
        """RegionStatus messages of the regions the server holds for us."""
        return list(self._call(self._stub.ListRegions, pb.ListRegionsRequest(), timeout,
                               "ListRegions").regions)

    @property
    def regions(self):
        with self._regions_lock:
            return dict(self._regions)

    # ------------------------------------------------------ building requests --

    def _find_ref(self, view):
        if view.address is None:
            return None
        with self._regions_lock:
            regions = list(self._regions.values())
        for region in regions:
            offset = region.offset_of(view.address, view.nbytes, view.device_index)
            if offset is not None and offset % DTYPE_SIZES[view.dtype] == 0:
                return tensor_ref(region.name, offset, view)
        return None

    def _place(self, obj, what, cuda_devices):
        """(TensorRef, None) when obj lies inside a registered region, else
        (None, inline Tensor)."""
        view = describe(obj, what)
        ref = self._find_ref(view)
        if ref is not None:
            if view.device == "cuda":
                cuda_devices.add(view.device_index)
            return ref, None
        return None, inline_tensor(view)

    def _finish(self, request, kv_return, kv_output, cuda_devices):
        if kv_output is not None:
            view = describe(kv_output, "kv_output")
            ref = self._find_ref(view)
            if ref is None:
                raise ValueError("kv_output must be a C-contiguous tensor inside a region "
                                 "registered with this Verifier")
            if view.device == "cuda":
                cuda_devices.add(view.device_index)
            request.kv_output.CopyFrom(ref)
            if kv_return is None:
                kv_return = "region"
        if isinstance(kv_return, int) and kv_return in KV_RETURN.values():
            request.kv_return = kv_return
        elif kv_return in KV_RETURN:
            request.kv_return = KV_RETURN[kv_return]
        else:
            raise ValueError(f"kv_return {kv_return!r}: None, 'handle', 'inline', 'none' or "
                             f"'region'")
        if cuda_devices and self.cuda_sync:
            import torch

            for device in cuda_devices:
                torch.cuda.current_stream(device).synchronize()
        return request

    def greedy_request(self, draft_tokens, target_tokens, *, draft_kv=None, vocab_size=0,
                       kv_return=None, kv_output=None, request_id=""):
        """A greedy VerifyRequest. One sequence: ``draft_tokens`` [γ],
        ``target_tokens`` [γ+1], ``draft_kv`` [γ, ...]. Several: 2-D arrays or
        lists of per-sequence arrays (γ may differ). ``kv_return``: None
        (server default), "handle", "inline", "none" or "region" (implied by
        ``kv_output``, a tensor inside a region with rows >= Σγ)."""
        single = _is_single_token_list(draft_tokens)
        if single:
            draft_tokens, target_tokens = [draft_tokens], [target_tokens]
            draft_kv = None if draft_kv is None else [draft_kv]
        count = len(draft_tokens)
        targets = _per_sequence(target_tokens, count, "target_tokens")
        kvs = _per_sequence(draft_kv, count, "draft_kv")
        request = pb.VerifyRequest(request_id=request_id)
        cuda_devices = set()
        for i in range(count):
            seq = request.sequences.add()
            seq.draft_tokens.extend(token_list(draft_tokens[i], f"draft_tokens[{i}]"))
            seq.greedy.target_tokens.extend(token_list(targets[i], f"target_tokens[{i}]"))
            if vocab_size:
                seq.vocab_size = vocab_size
            if kvs[i] is not None:
                ref, inline = self._place(kvs[i], f"draft_kv[{i}]", cuda_devices)
                if ref is not None:
                    seq.draft_kv_ref.CopyFrom(ref)
                else:
                    seq.draft_kv.CopyFrom(inline)
        return self._finish(request, kv_return, kv_output, cuda_devices)

    def sampled_request(self, draft_tokens, target, *, draft=None, kind="probabilities",
                        temperature=1.0, top_k=0, top_p=0.0, method="exact",
                        sigmoid_alpha=0.0, sigmoid_beta=0.0, validate_full_rows=False, seed=0,
                        draft_kv=None, vocab_size=None, kv_return=None, kv_output=None,
                        request_id=""):
        """A rejection-sampling VerifyRequest. One sequence: ``draft_tokens``
        [γ], ``target`` [γ+1, V] (probabilities, logits or log-probabilities,
        see ``kind``),
        ``draft`` [γ, V] or None (a deterministic drafter), ``draft_kv``
        [γ, ...]. Several: 3-D arrays ([B, γ+1, V]) or lists. ``seed`` keys
        the server's counter-based generator: the same request and seed give
        the same tokens. ``vocab_size`` defaults to V."""
        if kind not in _DISTRIBUTION_KINDS:
            raise ValueError(f"kind {kind!r}: one of {sorted(_DISTRIBUTION_KINDS)}")
        if method not in _METHODS:
            raise ValueError(f"method {method!r}: one of {sorted(_METHODS)}")
        single = _is_single_token_list(draft_tokens)
        if single:
            draft_tokens, target = [draft_tokens], [target]
            draft = None if draft is None else [draft]
            draft_kv = None if draft_kv is None else [draft_kv]
        count = len(draft_tokens)
        targets = _per_sequence(target, count, "target")
        drafts = _per_sequence(draft, count, "draft")
        kvs = _per_sequence(draft_kv, count, "draft_kv")
        request = pb.VerifyRequest(request_id=request_id, seed=seed)
        cuda_devices = set()

        def fill(distribution, obj, what):
            ref, inline = self._place(obj, what, cuda_devices)
            if ref is not None:
                distribution.values_ref.CopyFrom(ref)
            else:
                distribution.values.CopyFrom(inline)
            distribution.kind = _DISTRIBUTION_KINDS[kind]
            return ref.shape if ref is not None else inline.shape

        for i in range(count):
            seq = request.sequences.add()
            seq.draft_tokens.extend(token_list(draft_tokens[i], f"draft_tokens[{i}]"))
            s = seq.sampled
            shape = fill(s.target, targets[i], f"target[{i}]")
            if drafts[i] is not None:
                fill(s.draft, drafts[i], f"draft[{i}]")
            s.temperature = temperature
            s.top_k = top_k
            s.top_p = top_p
            s.method = _METHODS[method]
            s.sigmoid_alpha = sigmoid_alpha
            s.sigmoid_beta = sigmoid_beta
            s.validate_full_rows = validate_full_rows
            seq.vocab_size = vocab_size if vocab_size is not None else int(shape[-1])
            if kvs[i] is not None:
                ref, inline = self._place(kvs[i], f"draft_kv[{i}]", cuda_devices)
                if ref is not None:
                    seq.draft_kv_ref.CopyFrom(ref)
                else:
                    seq.draft_kv.CopyFrom(inline)
        return self._finish(request, kv_return, kv_output, cuda_devices)

    # ----------------------------------------------------------- verifying --

    def verify(self, request, timeout=None):
        """Blocking Verify of a VerifyRequest -> VerifyResult."""
        return VerifyResult(self._call(self._stub.Verify, request, timeout, "Verify"), request)

    def verify_greedy(self, draft_tokens, target_tokens, *, timeout=None, **kwargs):
        """greedy_request(...) then verify(); see greedy_request."""
        return self.verify(self.greedy_request(draft_tokens, target_tokens, **kwargs), timeout)

    def verify_sampled(self, draft_tokens, target, *, timeout=None, **kwargs):
        """sampled_request(...) then verify(); see sampled_request."""
        return self.verify(self.sampled_request(draft_tokens, target, **kwargs), timeout)

    def verify_ceiling(self, request, timeout=None):
        """VerifyCeiling: the raw-gRPC ceiling (verified = False)."""
        return VerifyResult(self._call(self._stub.VerifyCeiling, request, timeout,
                                       "VerifyCeiling"), request)

    def verify_async(self, request, timeout=None):
        """Non-blocking Verify: a concurrent.futures.Future of a VerifyResult
        (or of a VerifierError). Its callbacks run on a gRPC thread."""
        future = Future()
        future.set_running_or_notify_cancel()
        call = self._stub.Verify.future(request,
                                        timeout=self.timeout if timeout is None else timeout,
                                        metadata=self._metadata)

        def done(call):
            try:
                future.set_result(VerifyResult(call.result(), request))
            except grpc.RpcError as e:
                future.set_exception(from_rpc_error(e, "Verify"))
            except Exception as e:  # cancelled, or a bug: never leave it pending
                future.set_exception(e)

        call.add_done_callback(done)
        return future

    def stream(self, timeout=None, resend_unanswered=0):
        """Opens a VerifyStream (``timeout``, if given, bounds the whole
        stream): send() requests, each answered through its future. With
        ``resend_unanswered`` = N > 0, a stream that ends UNAVAILABLE (a
        draining or lost server) is reopened, up to N times in a row without
        an answer, and what got no answer is sent again (VerifyStream)."""
        return VerifyStream(self._stub.VerifyStream, timeout=timeout, metadata=self._metadata,
                            resend_unanswered=resend_unanswered)

    # ------------------------------------------------------------------ KV --

    def fetch_kv(self, handle, first_row=0, num_rows=0, chunk_bytes=0, release_after=False,
                 timeout=None):
        """The bytes of rows [first_row, first_row + num_rows) behind a KV
        handle (a KvHandle or its id; num_rows 0 = to the end). Every chunk is
        checked to continue the previous one."""
        handle_id = handle if isinstance(handle, str) else handle.id
        request = pb.FetchKvRequest(handle=handle_id, first_row=first_row, num_rows=num_rows,
                                    chunk_bytes=chunk_bytes, release_after=release_after)
        out = bytearray()
        total = None
        try:
            for chunk in self._stub.FetchKv(request,
                                            timeout=self.timeout if timeout is None else timeout,
                                            metadata=self._metadata):
                if chunk.offset != len(out):
                    raise VerifierError(grpc.StatusCode.DATA_LOSS,
                                        f"chunk at offset {chunk.offset}, expected {len(out)}",
                                        "FetchKv")
                if total is None:
                    total = chunk.total_bytes
                out += chunk.data
        except grpc.RpcError as e:
            raise from_rpc_error(e, "FetchKv") from None
        if total is not None and len(out) != total:
            raise VerifierError(grpc.StatusCode.DATA_LOSS,
                                f"received {len(out)} bytes of {total}", "FetchKv")
        return bytes(out)

    def release_kv(self, handle, timeout=None):
        """Frees a KV handle; returns the bytes returned to the server's arena."""
        handle_id = handle if isinstance(handle, str) else handle.id
        return self._call(self._stub.ReleaseKv, pb.ReleaseKvRequest(handle=handle_id), timeout,
                          "ReleaseKv").released_bytes
