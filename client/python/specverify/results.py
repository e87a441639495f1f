"""What a verification answers, in Python terms."""

from dataclasses import dataclass

import numpy as np

from specverify.tensors import WIRE_TO_NUMPY
from specverify.v1 import verifier_pb2 as pb


@dataclass(frozen=True)
class SequenceResult:
    """One sequence's answer: keep ``accepted_length`` draft tokens, then emit
    ``next_token``. Its KV rows are rows [kv_row_offset, kv_row_offset +
    kv_row_count) of the request's packed rows (kv_row_count ==
    accepted_length)."""

    accepted_length: int
    next_token: int
    mismatch: bool
    kv_row_offset: int
    kv_row_count: int


def _kv_layout(request):
    """(wire dtype, row shape) of the request's draft KV, or None."""
    if request is None:
        return None
    for seq in request.sequences:
        which = seq.WhichOneof("kv")
        if which is not None:
            t = getattr(seq, which)
            return t.dtype, tuple(t.shape[1:])
    return None


class VerifyResult:
    """A VerifyResponse with its request's KV layout, so that inline rows come
    back as arrays. ``response`` is the message itself."""

    def __init__(self, response, request=None):
        self.response = response
        self.request_id = response.request_id
        self.results = [
            SequenceResult(r.accepted_length, r.next_token, r.mismatch, r.kv_row_offset,
                           r.kv_row_count) for r in response.results
        ]
        self.kv_handle = response.kv if response.HasField("kv") else None
        self.kv_inline = response.kv_inline
        self.timing = response.timing
        self.verified = response.verified
        self.exact = response.exact
        self._layout = _kv_layout(request)

    def __len__(self):
        return len(self.results)

    def __getitem__(self, i):
        return self.results[i]

    @property
    def accepted_lengths(self):
        return np.array([r.accepted_length for r in self.results], dtype=np.int32)

    @property
    def next_tokens(self):
        return np.array([r.next_token for r in self.results], dtype=np.int32)

    @property
    def packed_rows(self):
        """Rows behind the request's KV (inline, handle or region): sum of k."""
        return sum(r.kv_row_count for r in self.results)

    def kv_rows(self, data=None):
        """The packed rows as a numpy array [rows, *row_shape] in the draft
        KV's dtype (bfloat16 and fp8 as uint16 / uint8): from ``data`` (e.g.
        bytes from Verifier.fetch_kv) or the inline rows."""
        if self._layout is None:
            raise ValueError("the request carried no draft KV (or was not built here)")
        dtype, row_shape = self._layout
        raw = self.kv_inline if data is None else data
        a = np.frombuffer(raw, dtype=WIRE_TO_NUMPY[dtype])
        return a.reshape((-1,) + row_shape)

    def sequence_kv_rows(self, i, data=None):
        """Sequence ``i``'s accepted rows (a view of kv_rows())."""
        r = self.results[i]
        return self.kv_rows(data)[r.kv_row_offset:r.kv_row_offset + r.kv_row_count]

    def __repr__(self):
        return (f"VerifyResult(request_id={self.request_id!r}, "
                f"accepted={[r.accepted_length for r in self.results]}, "
                f"next={[r.next_token for r in self.results]})")


KV_RETURN = {
    None: pb.KV_RETURN_UNSPECIFIED,
    "handle": pb.KV_RETURN_HANDLE,
    "inline": pb.KV_RETURN_INLINE,
    "none": pb.KV_RETURN_NONE,
    "region": pb.KV_RETURN_REGION,
}
