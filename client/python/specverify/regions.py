"""Registered regions: memory the worker shares with the server once, so that
requests name tensors inside it (TensorRef) instead of carrying their bytes.

* ShmRegion: POSIX shared memory. Python's
  ``multiprocessing.shared_memory.SharedMemory(name="x")`` calls
  ``shm_open("/x")``, i.e. the object ``/dev/shm/x``; the server is told
  ``shm_name="x"`` (the proto's name has no slashes) and opens the same
  object. Numpy arrays made by ``ndarray()`` / ``allocate()`` (or any array or
  CPU tensor whose bytes lie in the buffer) travel as references.
* CudaRegion: a torch CUDA tensor's memory, exported with CUDA IPC
  (specverify.cuda_ipc). CUDA tensors whose bytes lie inside it travel as
  references.

The server reads referenced bytes in place: do not change them until the
request that names them is answered.
"""

import os
import re
import threading
from multiprocessing import shared_memory

import numpy as np

from specverify import cuda_ipc

_NAME_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")


def check_region_name(name):
    if not isinstance(name, str) or not _NAME_RE.match(name):
        raise ValueError(f"region name {name!r} must be 1..64 characters of [A-Za-z0-9_.-]")


def _align_up(value, alignment):
    return (value + alignment - 1) // alignment * alignment


class Region:
    """What both kinds share: a name, a size, a base address and a bump
    allocator for carving tensors out of it."""

    kind = ""
    device_index = -1  # CUDA ordinal; -1 for host memory

    def __init__(self, name, byte_size, address):
        self.name = name
        self.byte_size = int(byte_size)
        self.address = int(address)
        self._next = 0
        self._lock = threading.Lock()

    def offset_of(self, address, nbytes, device_index=-1):
        """The offset of [address, address + nbytes) inside this region, or
        None when it does not lie entirely inside (or is on another device)."""
        if device_index != self.device_index:
            return None
        offset = address - self.address
        if offset < 0 or offset + nbytes > self.byte_size:
            return None
        return offset

    def _reserve(self, nbytes, alignment):
        with self._lock:
            offset = _align_up(self._next, alignment)
            if offset + nbytes > self.byte_size:
                raise MemoryError(f"region {self.name}: {nbytes} bytes at offset {offset} exceed "
                                  f"its {self.byte_size} bytes (reset() frees every allocation)")
            self._next = offset + nbytes
            return offset

    def reset(self):
        """Forgets every allocate(): the next one starts at offset 0 again
        (views made earlier alias the new ones)."""
        with self._lock:
            self._next = 0


class ShmRegion(Region):
    """A POSIX shared-memory region (see the module doc). Create it with
    Verifier.register_shm_region; ``close()`` after unregistering."""

    kind = "system"

    def __init__(self, name, shm, byte_size, owner):
        self.shm = shm
        self.shm_name = shm.name.lstrip("/")
        self._owner = owner
        self._base = np.frombuffer(shm.buf, dtype=np.uint8, count=byte_size)
        super().__init__(name, byte_size, self._base.__array_interface__["data"][0])

    @staticmethod
    def create(name, byte_size, shm_name=None):
        """A new shared-memory object of ``byte_size`` bytes (zeroed), named
        ``shm_name`` (default: unique per process and region)."""
        check_region_name(name)
        if byte_size <= 0:
            raise ValueError(f"region {name}: byte_size {byte_size} must be > 0")
        shm_name = shm_name or f"specverify.{os.getpid()}.{name}"
        if "/" in shm_name:
            raise ValueError(f"shm_name {shm_name!r} must not contain '/'")
        shm = shared_memory.SharedMemory(name=shm_name, create=True, size=byte_size)
        return ShmRegion(name, shm, byte_size, owner=True)

    @staticmethod
    def attach(name, shm, byte_size=None):
        """A region over an existing SharedMemory object (not unlinked on close)."""
        check_region_name(name)
        return ShmRegion(name, shm, byte_size or shm.size, owner=False)

    @property
    def buf(self):
        return self.shm.buf

    def ndarray(self, shape, dtype, offset=0):
        """A numpy view of the region's bytes at ``offset``."""
        dtype = np.dtype(dtype)
        count = int(np.prod(shape, dtype=np.int64))
        if offset < 0 or offset + count * dtype.itemsize > self.byte_size:
            raise ValueError(f"region {self.name}: {count * dtype.itemsize} bytes at {offset} "
                             f"exceed its {self.byte_size} bytes")
        return self._base[offset:offset + count * dtype.itemsize].view(dtype).reshape(shape)

    def allocate(self, shape, dtype, alignment=256):
        """A fresh numpy view, ``alignment``-aligned after the previous one."""
        dtype = np.dtype(dtype)
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        return self.ndarray(shape, dtype, self._reserve(nbytes, alignment))

    def close(self):
        """Unmaps the buffer, and removes the shared-memory object when this
        client created it. Every numpy view of it must be gone first (Python
        refuses to unmap exported buffers)."""
        self._base = None
        try:
            self.shm.close()
        except BufferError:
            # Views are still alive: the mapping must stay; remove the name
            # anyway so that nothing is left in /dev/shm once they are gone.
            self._unlink()
            raise BufferError(f"region {self.name}: numpy views of it are still alive; "
                              f"{self.shm_name} was unlinked, its mapping stays until they "
                              f"are gone") from None
        self._unlink()

    def _unlink(self):
        if self._owner:
            self._owner = False
            try:
                self.shm.unlink()
            except FileNotFoundError:
                pass


class CudaRegion(Region):
    """A torch CUDA tensor's memory registered with the server. Holds the
    tensor, so its memory stays allocated while the region lives."""

    kind = "cuda"

    def __init__(self, name, tensor):
        check_region_name(name)
        if tensor.device.type != "cuda":
            raise ValueError(f"region {name}: tensor is on {tensor.device}, not a CUDA device")
        if not tensor.is_contiguous():
            raise ValueError(f"region {name}: tensor must be contiguous")
        self.tensor = tensor
        self.device_index = tensor.device.index
        nbytes = tensor.numel() * tensor.element_size()
        if nbytes <= 0:
            raise ValueError(f"region {name}: tensor is empty")
        pointer = tensor.data_ptr()
        handle, base, alloc_size = cuda_ipc.export_allocation(pointer, self.device_index)
        self.ipc_handle = handle
        # Where the region starts in the exported cudaMalloc allocation: the
        # caching allocator's block offset plus the tensor's storage offset,
        # both contained in data_ptr() - base.
        self.allocation_offset = pointer - base
        self.allocation_size = alloc_size
        if self.allocation_offset + nbytes > alloc_size:
            raise ValueError(f"region {name}: tensor spans more than one CUDA allocation")
        super().__init__(name, nbytes, pointer)

    def view(self, shape, dtype, offset=0):
        """A torch view of the region's bytes at ``offset`` (dtype: torch dtype)."""
        import torch

        itemsize = torch.empty((), dtype=dtype).element_size()
        count = 1
        for d in shape:
            count *= int(d)
        if offset < 0 or offset % itemsize or offset + count * itemsize > self.byte_size:
            raise ValueError(f"region {self.name}: {count * itemsize} bytes at {offset} "
                             f"exceed its {self.byte_size} bytes or are misaligned")
        flat = self.tensor.view(-1).view(torch.uint8) if self.tensor.element_size() != 1 \
            else self.tensor.view(-1)
        return flat[offset:offset + count * itemsize].view(dtype).view(*shape)

    def allocate(self, shape, dtype, alignment=256):
        import torch

        itemsize = torch.empty((), dtype=dtype).element_size()
        count = 1
        for d in shape:
            count *= int(d)
        return self.view(shape, dtype, self._reserve(count * itemsize, alignment))

    def close(self):
        self.tensor = None
