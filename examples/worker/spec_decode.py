"""Speculative decoding with a target and a draft model, verified by
specverify.

One round, for one sequence whose committed tokens are ``tokens``:

1. Draft: feed the committed tokens the draft cache lacks (its KV rows go
   straight into the draft cache: they are committed), then propose x_1..x_γ
   one at a time (argmax, or sampled from q_j = softmax(logits / T)), and
   feed x_γ too: the KV row of every proposed token lands in a scratch buffer
   ("speculative rows", row j = x_{j+1}'s keys and values for every layer).
   γ + 1 draft forward passes.
2. Target: ONE forward pass over the pending committed token and x_1..x_γ
   gives the γ + 1 target positions (argmax tokens for greedy, p_j =
   softmax(logits / T) for sampled).
3. Verify: specverify decides k and the next token and packs the accepted
   speculative rows [0, k) -- returned inline, or written into the worker's
   region (KV_RETURN_REGION) with the inputs read from it (shared memory on
   a CPU, CUDA IPC on a GPU).
4. Commit: tokens += x_1..x_k, next; the draft cache takes the k packed rows;
   the target cache keeps the positions up to x_k (its rows for the rejected
   tokens are dropped by moving its length back).

Greedy is lossless: the result is exactly the target's own greedy decode.
Sampled follows Leviathan et al.: the emitted tokens are distributed as the
target's samples.
"""

import time
from dataclasses import dataclass, field

import numpy as np
import torch


def _sync(device):
    if device.type == "cuda":
        torch.cuda.synchronize(device)


@dataclass
class Timings:
    """Wall seconds by stage (CUDA work synchronized at stage boundaries)."""

    draft: float = 0.0
    target: float = 0.0
    verify: float = 0.0  # building the request, the RPC, reading the answer
    commit: float = 0.0
    server: float = 0.0  # the server's own server_ns, summed
    total: float = 0.0

    def add(self, other):
        for name in self.__dataclass_fields__:
            setattr(self, name, getattr(self, name) + getattr(other, name))


@dataclass
class Decoded:
    tokens: list
    rounds: int = 0
    proposed: int = 0
    accepted: int = 0
    timings: Timings = field(default_factory=Timings)
    state: object = None  # the sequence's final _State (tokens, caches)


class Staging:
    """Where a round's payload lives for the transport:

    * "inline": host tensors; the bytes travel in the request, packed rows
      come back in the response.
    * "shm": numpy views into a POSIX shared-memory region; the request names
      them, the server writes the packed rows into the region.
    * "cuda": views into a CUDA region (a torch tensor exported with CUDA
      IPC); nothing but the request's metadata crosses the host.
    """

    def __init__(self, verifier, transport, gamma, row_bytes, vocab, device, name="worker"):
        self.transport = transport
        self.region = None
        sizes = {"kv_in": gamma * row_bytes, "kv_out": gamma * row_bytes,
                 "p": (gamma + 1) * vocab * 4, "q": gamma * vocab * 4}
        total = sum(-(-s // 256) * 256 for s in sizes.values())
        if transport == "inline":
            return
        if transport == "shm":
            self.region = verifier.register_shm_region(name, total)
            alloc = self.region.allocate
            self.kv_in = torch.from_numpy(alloc((gamma, row_bytes), np.uint8))
            self.kv_out = torch.from_numpy(alloc((gamma, row_bytes), np.uint8))
            self.p = torch.from_numpy(alloc((gamma + 1, vocab), np.float32))
            self.q = torch.from_numpy(alloc((gamma, vocab), np.float32))
        elif transport == "cuda":
            memory = torch.zeros(total, dtype=torch.uint8, device=device)
            self.region = verifier.register_cuda_region(memory, name)
            alloc = self.region.allocate
            self.kv_in = alloc((gamma, row_bytes), torch.uint8)
            self.kv_out = alloc((gamma, row_bytes), torch.uint8)
            self.p = alloc((gamma + 1, vocab), torch.float32)
            self.q = alloc((gamma, vocab), torch.float32)
        else:
            raise ValueError(f"transport {transport!r}: inline, shm or cuda")

    def close(self, verifier):
        if self.region is not None:
            verifier.unregister_region(self.region)
            self.kv_in = self.kv_out = self.p = self.q = None
            self.region.close()
            self.region = None


class SpeculativeDecoder:
    """Decodes one sequence at a time with a draft and a target model on
    ``device``, verified by ``verifier`` (a specverify.Verifier)."""

    def __init__(self, target, draft, verifier, gamma, mode="greedy", temperature=1.0,
                 transport="inline", device="cpu"):
        if mode not in ("greedy", "sampled"):
            raise ValueError(f"mode {mode!r}: greedy or sampled")
        self.target, self.draft = target, draft
        self.verifier = verifier
        self.gamma = gamma
        self.mode = mode
        self.temperature = temperature
        self.device = torch.device(device)
        self.vocab = target.c.vocab
        dtype = draft.head.weight.dtype
        self.row_shape = (draft.c.n_layers, 2, draft.c.n_heads, draft.c.head_dim)
        self.row_bytes = draft.c.row_elements() * torch.empty((), dtype=dtype).element_size()
        self.staging = Staging(verifier, transport, gamma, self.row_bytes, self.vocab,
                               self.device)

    def close(self):
        self.staging.close(self.verifier)

    # ------------------------------------------------------------ one round --

    def _pick(self, logits, generator):
        """(token, probability row or None) from one logits row."""
        if self.mode == "greedy":
            return int(logits.argmax()), None
        q = torch.softmax(logits.float() / self.temperature, dim=-1)
        return int(torch.multinomial(q, 1, generator=generator)), q

    def round(self, state, seed, generator, timings):
        """One speculative round on ``state`` (a _State); returns (k, next)."""
        g, dev = self.gamma, self.device
        draft, target = self.draft, self.target
        # 1. Draft.
        t0 = time.perf_counter()
        pending = state.tokens[state.dn:]
        logits, rows = draft.step(pending, state.dcache[:state.dn])
        state.dcache[state.dn:state.dn + len(pending)] = rows
        state.dn += len(pending)
        scratch = torch.empty((g,) + self.row_shape, dtype=rows.dtype, device=dev)
        proposed, qs = [], []
        token, q = self._pick(logits[-1], generator)
        for j in range(g):
            proposed.append(token)
            qs.append(q)
            logits, row = draft.step([token], state.dcache[:state.dn], scratch[:j])
            scratch[j] = row[0]
            if j + 1 < g:
                token, q = self._pick(logits[-1], generator)
        _sync(dev)
        t1 = time.perf_counter()
        # 2. Target: one pass over the pending token and the γ proposals.
        fed = state.tokens[state.tn:] + proposed
        tlogits, trows = target.step(fed, state.tcache[:state.tn])
        state.tcache[state.tn:state.tn + len(fed)] = trows
        tlogits = tlogits[-(g + 1):]
        if self.mode == "greedy":
            target_tokens = tlogits.argmax(dim=-1)
        else:
            p = torch.softmax(tlogits.float() / self.temperature, dim=-1)
        _sync(dev)
        t2 = time.perf_counter()
        # 3. Verify.
        st = self.staging
        kv_bytes = scratch.view(g, -1).view(torch.uint8)
        kwargs = {}
        if st.transport == "inline":
            kwargs["draft_kv"] = kv_bytes
            kwargs["kv_return"] = "inline"
        else:
            st.kv_in.copy_(kv_bytes)
            kwargs["draft_kv"] = st.kv_in
            kwargs["kv_output"] = st.kv_out
        if self.mode == "greedy":
            request = self.verifier.greedy_request(proposed, target_tokens, vocab_size=self.vocab,
                                                   **kwargs)
        else:
            q = torch.stack(qs)
            if st.transport != "inline":
                st.p.copy_(p)
                st.q.copy_(q)
                p, q = st.p, st.q
            request = self.verifier.sampled_request(proposed, p, draft=q, seed=seed, **kwargs)
        result = self.verifier.verify(request)
        k, nxt = result[0].accepted_length, result[0].next_token
        timings.server += result.timing.server_ns * 1e-9
        t3 = time.perf_counter()
        # 4. Commit the packed rows into the draft cache.
        if k:
            if st.transport == "inline":
                packed = torch.frombuffer(bytearray(result.kv_inline), dtype=torch.uint8)
                packed = packed.to(dev)
            else:
                packed = st.kv_out[:k]
            state.dcache[state.dn:state.dn + k] = packed.view(k, -1).view(
                scratch.dtype).view((k,) + self.row_shape)
        state.dn += k
        state.tn += len(fed) - g + k  # the pending token(s) and x_1..x_k
        state.tokens += proposed[:k] + [nxt]
        _sync(dev)
        t4 = time.perf_counter()
        timings.draft += t1 - t0
        timings.target += t2 - t1
        timings.verify += t3 - t2
        timings.commit += t4 - t3
        return k, nxt

    # ------------------------------------------------------------ decoding --

    def prefill(self, prompt, capacity):
        return _State(prompt, self.target, self.draft, capacity)

    def generate(self, prompt, max_new_tokens, seed=0, state=None):
        """Speculative decode of ``max_new_tokens`` after ``prompt`` (ids)."""
        generator = torch.Generator(device=self.device).manual_seed(seed)
        capacity = len(prompt) + max_new_tokens + self.gamma + 2
        start = time.perf_counter()
        state = state or self.prefill(prompt, capacity)
        out = Decoded(tokens=[])
        while len(state.tokens) - len(prompt) < max_new_tokens:
            k, _ = self.round(state, seed * 1000003 + out.rounds, generator, out.timings)
            out.rounds += 1
            out.proposed += self.gamma
            out.accepted += k
        _sync(self.device)
        out.timings.total = time.perf_counter() - start
        out.tokens = state.tokens[len(prompt):len(prompt) + max_new_tokens]
        out.state = state
        return out

    def draft_cache_error(self, state):
        """Largest absolute difference between the draft cache as committed
        (prompt rows computed here, then the packed rows the server returned)
        and the draft's KV recomputed from scratch over the same tokens: a
        wrong, missing or misordered packed row shows here, while the greedy
        output would stay lossless (a bad draft only lowers acceptance)."""
        fresh = self.draft.empty_cache(state.dn)
        _, rows = self.draft.step(state.tokens[:state.dn], fresh[:0])
        return float((rows - state.dcache[:state.dn]).abs().max())


class _State:
    """One sequence: committed tokens; the target cache holds every committed
    position but the last (tn), the draft cache what it has been fed (dn)."""

    def __init__(self, prompt, target, draft, capacity):
        self.tokens = list(prompt)
        self.tcache = target.empty_cache(capacity)
        self.dcache = draft.empty_cache(capacity)
        self.tn = self.dn = 0
        if len(prompt) > 1:
            _, rows = target.step(prompt[:-1], self.tcache[:0])
            self.tcache[:len(prompt) - 1] = rows
            _, rows = draft.step(prompt[:-1], self.dcache[:0])
            self.dcache[:len(prompt) - 1] = rows
            self.tn = self.dn = len(prompt) - 1

    def clone(self):
        other = object.__new__(_State)
        other.tokens = list(self.tokens)
        other.tcache, other.dcache = self.tcache.clone(), self.dcache.clone()
        other.tn, other.dn = self.tn, self.dn
        return other


def target_decode(target, prompt, max_new_tokens, mode="greedy", temperature=1.0, seed=0,
                  device="cpu"):
    """The target alone, one token per forward pass (the baseline, and the
    oracle of greedy speculative decoding). Returns (tokens, seconds,
    forward seconds)."""
    device = torch.device(device)
    generator = torch.Generator(device=device).manual_seed(seed)
    start = time.perf_counter()
    cache = target.empty_cache(len(prompt) + max_new_tokens + 1)
    logits, rows = target.step(prompt, cache[:0])
    cache[:len(prompt)] = rows
    n = len(prompt)
    out = []
    while True:
        row = logits[-1]
        if mode == "greedy":
            token = int(row.argmax())
        else:
            q = torch.softmax(row.float() / temperature, dim=-1)
            token = int(torch.multinomial(q, 1, generator=generator))
        out.append(token)
        if len(out) == max_new_tokens:
            break
        logits, rows = target.step([token], cache[:n])
        cache[n] = rows[0]
        n += 1
    _sync(device)
    return out, time.perf_counter() - start


def target_distribution(target, prompt, temperature=1.0):
    """softmax(logits / T) of the target's next token after ``prompt``."""
    logits, _ = target.step(prompt, target.empty_cache(len(prompt))[:0])
    return torch.softmax(logits[-1].double() / temperature, dim=-1).cpu().numpy()
