"""CUDA IPC through the CUDA driver (libcuda.so.1, present wherever CUDA
runs), called with ctypes.

Why the driver and not ``tensor.untyped_storage()._share_cuda_()``: that call
(torch's own multiprocessing path) also swaps the storage's deleter for a
reference-counted one that keeps the block alive until every consumer
process decrements a counter file -- which the server, being C++, never
does -- so the memory would never return to the caching allocator; and its
handle bytes changed format between torch versions (64 raw bytes in 1.x; a
version byte, a type byte and then the 64 bytes in 2.x). The driver gives
the same two facts directly: the cudaMalloc allocation that contains a
pointer (cuMemGetAddressRange: its base and size -- the caching allocator
carves tensors out of larger cudaMalloc blocks, and an IPC handle always
names the start of such a block), and the handle of that allocation
(cuIpcGetMemHandle, the driver call behind cudaIpcGetMemHandle). The
region's CudaIpcMemory.offset_bytes is then pointer - base.

Memory from torch's expandable segments (PYTORCH_CUDA_ALLOC_CONF=
expandable_segments:True) is not cudaMalloc memory and cannot be exported
this way; the driver's error is reported with that hint.
"""

import ctypes
import threading

from specverify.errors import CudaError

IPC_HANDLE_BYTES = 64
_CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1


class _IpcMemHandle(ctypes.Structure):
    # Unsigned bytes, not c_char: ctypes reads a c_char array field as a
    # NUL-terminated string, which cut real handles short (seen on the H100).
    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]


class _Driver:
    def __init__(self):
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as e:
            raise CudaError(f"cannot load the CUDA driver libcuda.so.1: {e}") from e
        self._check(self._fn("cuInit")(0), "cuInit")

    def _fn(self, name):
        # The _v2 entry points are what cuda.h's macros name since CUDA 4/11.
        for candidate in (name + "_v2", name):
            fn = getattr(self.lib, candidate, None)
            if fn is not None:
                return fn
        raise CudaError(f"the CUDA driver has no {name}")

    def _check(self, result, what):
        if result != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorName(result, ctypes.byref(text))
            name = text.value.decode() if text.value else f"CUresult {result}"
            raise CudaError(f"{what} failed: {name}")

    def call(self, name, *args):
        self._check(self._fn(name)(*args), name)

    def push_primary_context(self, device_ordinal):
        device = ctypes.c_int()
        self.call("cuDeviceGet", ctypes.byref(device), ctypes.c_int(device_ordinal))
        context = ctypes.c_void_p()
        self.call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        self.call("cuCtxPushCurrent", context)
        return device

    def pop_primary_context(self, device):
        popped = ctypes.c_void_p()
        self.call("cuCtxPopCurrent", ctypes.byref(popped))
        self.call("cuDevicePrimaryCtxRelease", device)


_driver = None
_driver_lock = threading.Lock()


def driver():
    global _driver
    with _driver_lock:
        if _driver is None:
            _driver = _Driver()
        return _driver


def export_allocation(pointer, device_ordinal):
    """(ipc_handle bytes, allocation base, allocation size) for device memory
    at ``pointer`` on ``device_ordinal``, in the primary context (the one
    the CUDA runtime, and so torch, uses)."""
    d = driver()
    device = d.push_primary_context(device_ordinal)
    try:
        base = ctypes.c_uint64()
        size = ctypes.c_size_t()
        d.call("cuMemGetAddressRange", ctypes.byref(base), ctypes.byref(size),
               ctypes.c_uint64(pointer))
        handle = _IpcMemHandle()
        try:
            d.call("cuIpcGetMemHandle", ctypes.byref(handle), base)
        except CudaError as e:
            raise CudaError(f"{e} (memory from expandable segments or cuMemCreate cannot be "
                            f"exported; unset PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True)"
                            ) from e
        return ctypes.string_at(ctypes.addressof(handle), IPC_HANDLE_BYTES), base.value, size.value
    finally:
        d.pop_primary_context(device)


def read_exported(ipc_handle, device_ordinal, offset, nbytes):
    """Opens an exported allocation (from ANOTHER process: CUDA refuses a
    handle in the process that made it) and copies ``nbytes`` from
    ``offset`` to the host. For tests and diagnostics."""
    if len(ipc_handle) != IPC_HANDLE_BYTES:
        raise ValueError(f"ipc_handle has {len(ipc_handle)} bytes, not {IPC_HANDLE_BYTES}")
    d = driver()
    device = d.push_primary_context(device_ordinal)
    try:
        handle = _IpcMemHandle()
        ctypes.memmove(ctypes.addressof(handle), ipc_handle, IPC_HANDLE_BYTES)
        base = ctypes.c_uint64()
        # The handle travels by value (a 64-byte struct): say so to ctypes.
        open_handle = d._fn("cuIpcOpenMemHandle")
        open_handle.argtypes = [ctypes.POINTER(ctypes.c_uint64), _IpcMemHandle, ctypes.c_uint]
        d._check(open_handle(ctypes.byref(base), handle, _CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS),
                 "cuIpcOpenMemHandle")
        try:
            out = ctypes.create_string_buffer(nbytes)
            d.call("cuMemcpyDtoH", out, ctypes.c_uint64(base.value + offset),
                   ctypes.c_size_t(nbytes))
            return out.raw
        finally:
            d.call("cuIpcCloseMemHandle", base)
    finally:
        d.pop_primary_context(device)
