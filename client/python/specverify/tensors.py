"""Numpy arrays and torch tensors as the wire's Tensor (inline bytes) and
TensorRef (a place inside a registered region).

torch is never imported here unless the caller passes a torch tensor: a worker
that uses numpy only does not pay for importing it.
"""

import sys
from dataclasses import dataclass

import numpy as np

from specverify.v1 import verifier_pb2 as pb

DTYPE_SIZES = {
    pb.DATA_TYPE_FLOAT32: 4,
    pb.DATA_TYPE_FLOAT16: 2,
    pb.DATA_TYPE_BFLOAT16: 2,
    pb.DATA_TYPE_UINT8: 1,
    pb.DATA_TYPE_INT8: 1,
    pb.DATA_TYPE_FP8_E4M3: 1,
}

_NUMPY_TO_WIRE = {
    np.dtype(np.float32): pb.DATA_TYPE_FLOAT32,
    np.dtype(np.float16): pb.DATA_TYPE_FLOAT16,
    np.dtype(np.uint8): pb.DATA_TYPE_UINT8,
    np.dtype(np.int8): pb.DATA_TYPE_INT8,
}

# How wire bytes are viewed in numpy: the dtypes numpy lacks (bfloat16,
# fp8) come back as raw integers of their width.
WIRE_TO_NUMPY = {
    pb.DATA_TYPE_FLOAT32: np.dtype(np.float32),
    pb.DATA_TYPE_FLOAT16: np.dtype(np.float16),
    pb.DATA_TYPE_BFLOAT16: np.dtype(np.uint16),
    pb.DATA_TYPE_UINT8: np.dtype(np.uint8),
    pb.DATA_TYPE_INT8: np.dtype(np.int8),
    pb.DATA_TYPE_FP8_E4M3: np.dtype(np.uint8),
}

_DTYPE_NAMES = {
    "float32": pb.DATA_TYPE_FLOAT32,
    "float16": pb.DATA_TYPE_FLOAT16,
    "bfloat16": pb.DATA_TYPE_BFLOAT16,
    "uint8": pb.DATA_TYPE_UINT8,
    "int8": pb.DATA_TYPE_INT8,
    "fp8_e4m3": pb.DATA_TYPE_FP8_E4M3,
}


def wire_dtype(dtype):
    """A wire DataType from a name ("bfloat16"), a numpy dtype or the enum."""
    if isinstance(dtype, str):
        if dtype not in _DTYPE_NAMES:
            raise ValueError(f"unknown dtype {dtype!r}; one of {sorted(_DTYPE_NAMES)}")
        return _DTYPE_NAMES[dtype]
    if isinstance(dtype, int) and dtype in DTYPE_SIZES:
        return dtype
    return _NUMPY_TO_WIRE[np.dtype(dtype)]


class Typed:
    """A numpy array whose elements carry a wire dtype that numpy has no type
    for: ``Typed(raw_uint16_array, "bfloat16")`` sends the array's bytes as
    BFLOAT16. The array's itemsize must equal the dtype's size. (torch
    tensors need no wrapper: their dtype maps directly.)"""

    def __init__(self, array, dtype):
        self.array = array
        self.dtype = wire_dtype(dtype)


def _is_torch(obj):
    return type(obj).__module__.startswith("torch") and "torch" in sys.modules


def _torch_wire_dtype(torch, dtype):
    table = {
        torch.float32: pb.DATA_TYPE_FLOAT32,
        torch.float16: pb.DATA_TYPE_FLOAT16,
        torch.bfloat16: pb.DATA_TYPE_BFLOAT16,
        torch.uint8: pb.DATA_TYPE_UINT8,
        torch.int8: pb.DATA_TYPE_INT8,
    }
    fp8 = getattr(torch, "float8_e4m3fn", None)
    if fp8 is not None:
        table[fp8] = pb.DATA_TYPE_FP8_E4M3
    if dtype not in table:
        raise TypeError(f"torch dtype {dtype} has no wire DataType "
                        f"(float32, float16, bfloat16, uint8, int8, float8_e4m3fn)")
    return table[dtype]


@dataclass
class TensorView:
    """Where an array-like's bytes are. ``address`` is the first byte when the
    elements are C-contiguous (only then can it travel as a TensorRef), else
    None."""

    obj: object
    dtype: int  # wire DataType
    shape: tuple
    nbytes: int
    device: str  # "cpu" or "cuda"
    device_index: int  # CUDA ordinal; -1 for host memory
    address: object  # int or None

    def to_bytes(self):
        """The elements as little-endian row-major bytes (one copy; a CUDA
        tensor is copied to the host first, which synchronizes its stream)."""
        obj = self.obj
        if isinstance(obj, Typed):
            obj = obj.array
        if _is_torch(obj):
            import torch

            t = obj.detach()
            if t.device.type != "cpu":
                t = t.cpu()
            t = t.contiguous()
            if t.dtype in (torch.bfloat16, torch.float16):
                t = t.view(torch.int16)
            elif t.element_size() == 1 and t.dtype not in (torch.uint8, torch.int8):
                t = t.view(torch.uint8)
            return t.numpy().tobytes()
        a = np.asarray(obj)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        return np.ascontiguousarray(a).tobytes()


def describe(obj, what="tensor"):
    """A TensorView of a numpy array, a Typed array, a torch tensor, or a
    (nested) list of floats (taken as float32)."""
    if isinstance(obj, Typed):
        a = np.asarray(obj.array)
        inner = _describe_numpy(a, obj.dtype)
        itemsize = a.dtype.itemsize
        if itemsize != DTYPE_SIZES[obj.dtype]:
            raise TypeError(f"{what}: Typed dtype size {DTYPE_SIZES[obj.dtype]} does not match "
                            f"the array's element size {itemsize}")
        inner.obj = obj
        inner.dtype = obj.dtype
        return inner
    if _is_torch(obj):
        import torch

        if not isinstance(obj, torch.Tensor):
            raise TypeError(f"{what}: {type(obj).__name__} is not a tensor")
        dtype = _torch_wire_dtype(torch, obj.dtype)
        contiguous = obj.is_contiguous()
        cuda = obj.device.type == "cuda"
        if obj.device.type not in ("cpu", "cuda"):
            raise TypeError(f"{what}: device {obj.device} is neither cpu nor cuda")
        return TensorView(obj=obj, dtype=dtype, shape=tuple(int(d) for d in obj.shape),
                          nbytes=obj.numel() * obj.element_size(),
                          device="cuda" if cuda else "cpu",
                          device_index=obj.device.index if cuda else -1,
                          address=obj.data_ptr() if contiguous else None)
    if not isinstance(obj, np.ndarray):
        obj = np.asarray(obj, dtype=np.float32)
    if obj.dtype not in _NUMPY_TO_WIRE:
        raise TypeError(f"{what}: numpy dtype {obj.dtype} has no wire DataType "
                        f"(float32, float16, uint8, int8; wrap other bytes in specverify.Typed)")
    return _describe_numpy(obj, _NUMPY_TO_WIRE[obj.dtype])


def _describe_numpy(a, dtype):
    return TensorView(obj=a, dtype=dtype, shape=tuple(a.shape), nbytes=a.nbytes, device="cpu",
                      device_index=-1,
                      address=a.__array_interface__["data"][0]
                      if a.flags.c_contiguous and a.dtype.byteorder != ">" else None)


def inline_tensor(view):
    """The wire Tensor with the view's bytes inline."""
    return pb.Tensor(dtype=view.dtype, shape=view.shape, data=view.to_bytes())


def tensor_ref(region_name, offset, view):
    return pb.TensorRef(region=region_name, offset_bytes=offset, dtype=view.dtype,
                        shape=view.shape)


def token_list(obj, what):
    """Token ids (list, numpy or torch, 1-D, integer) -> list of int in int32."""
    if _is_torch(obj):
        obj = obj.detach().cpu().numpy()
    a = np.asarray(obj)
    if a.ndim != 1:
        raise ValueError(f"{what}: token ids must be 1-D, got shape {a.shape}")
    if a.size and not np.issubdtype(a.dtype, np.integer):
        raise TypeError(f"{what}: token ids must be integers, got {a.dtype}")
    if a.size and (a.min() < -(2**31) or a.max() >= 2**31):
        raise ValueError(f"{what}: token id outside int32")
    return [int(v) for v in a.tolist()]
