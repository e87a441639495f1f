"""specverify: the Python client of the specverify verification service.

    import specverify
    with specverify.Verifier("127.0.0.1:50051") as v:
        r = v.verify_greedy(draft_tokens=[5, 7, 9], target_tokens=[5, 7, 2, 4])
        r[0].accepted_length, r[0].next_token      # 2, 2

See client/python/README.md for regions (shared memory, CUDA IPC), sampled
verification, KV returns and the streaming and futures forms.
"""

from specverify._version import __version__
from specverify.client import Verifier, default_service_config
from specverify.errors import CudaError, VerifierError
from specverify.regions import CudaRegion, Region, ShmRegion
from specverify.results import SequenceResult, VerifyResult
from specverify.stream import VerifyStream
from specverify.tensors import Typed
from specverify.v1 import verifier_pb2 as pb

__all__ = [
    "__version__", "CudaError", "CudaRegion", "Region", "SequenceResult", "ShmRegion", "Typed", "Verifier",
    "VerifierError", "VerifyResult", "VerifyStream", "default_service_config", "pb",
]
