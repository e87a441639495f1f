"""Two small causal transformers -- a target and a draft -- trained at start-up
on text that every Debian (and Ubuntu) system ships: the GNU GPL version 3,
/usr/share/common-licenses/GPL-3 (35 kB, 76 distinct bytes). No download, no
weights in the repository.

Vocabulary: the distinct bytes of the text (76 symbols), so that sampled
statistics over the vocabulary are feasible. Both models learn the same text
for a bounded number of steps with fixed seeds, so their next-token
distributions are peaked (legal English is repetitive at the character level)
and correlated (same data, the draft is smaller) -- what speculative decoding
needs to be worth anything.

The KV cache is position-major: ``[positions, layers, 2, heads, head_dim]``,
so that one position's keys and values for every layer ("a KV row", the
server's opaque row) are contiguous bytes.
"""

import hashlib
import math
import os
import time
from dataclasses import asdict, dataclass

import torch
import torch.nn.functional as F
from torch import nn

CORPUS = "/usr/share/common-licenses/GPL-3"


@dataclass(frozen=True)
class ModelConfig:
    vocab: int
    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int
    max_len: int = 512

    @property
    def head_dim(self):
        return self.d_model // self.n_heads

    def row_elements(self):
        """Elements of one position's KV row: layers x (K, V) x heads x head_dim."""
        return self.n_layers * 2 * self.d_model


@dataclass(frozen=True)
class TrainConfig:
    steps: int
    batch: int = 32
    context: int = 64
    lr: float = 3e-3
    seed: int = 0


class Corpus:
    def __init__(self, path=CORPUS):
        with open(path, "rb") as f:
            self.data = f.read()
        self.symbols = sorted(set(self.data))
        self.index = {b: i for i, b in enumerate(self.symbols)}
        self.ids = torch.tensor([self.index[b] for b in self.data], dtype=torch.long)
        self.sha256 = hashlib.sha256(self.data).hexdigest()

    @property
    def vocab(self):
        return len(self.symbols)

    def encode(self, text):
        raw = text.encode() if isinstance(text, str) else bytes(text)
        missing = sorted({b for b in raw if b not in self.index})
        if missing:
            raise ValueError(f"prompt has bytes outside the corpus vocabulary: {missing}")
        return [self.index[b] for b in raw]

    def decode(self, ids):
        return bytes(self.symbols[i] for i in ids).decode(errors="replace")


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.ln1 = nn.LayerNorm(c.d_model)
        self.qkv = nn.Linear(c.d_model, 3 * c.d_model)
        self.proj = nn.Linear(c.d_model, c.d_model)
        self.ln2 = nn.LayerNorm(c.d_model)
        self.mlp = nn.Sequential(nn.Linear(c.d_model, c.d_ff), nn.GELU(), nn.Linear(c.d_ff, c.d_model))

    def forward(self, x, past_k=None, past_v=None):
        """x [B, m, d]; past_k/v [B, H, n, hd] or None. Returns (y, k, v) with
        k, v [B, H, m, hd] of the m new positions. New position i attends to
        every past position and to new positions 0..i."""
        c = self.c
        b, m, _ = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c.d_model, dim=-1)
        q, k, v = (t.view(b, m, c.n_heads, c.head_dim).transpose(1, 2) for t in (q, k, v))
        keys = k if past_k is None else torch.cat([past_k, k], dim=2)
        values = v if past_v is None else torch.cat([past_v, v], dim=2)
        n = keys.shape[2] - m
        scores = q @ keys.transpose(-1, -2) / math.sqrt(c.head_dim)
        causal = torch.ones(m, n + m, dtype=torch.bool, device=x.device).tril(diagonal=n)
        scores = scores.masked_fill(~causal, float("-inf"))
        y = (scores.softmax(dim=-1) @ values).transpose(1, 2).reshape(b, m, c.d_model)
        x = x + self.proj(y)
        x = x + self.mlp(self.ln2(x))
        return x, k, v


class TinyLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        self.tok = nn.Embedding(c.vocab, c.d_model)
        self.pos = nn.Embedding(c.max_len, c.d_model)
        self.blocks = nn.ModuleList(Block(c) for _ in range(c.n_layers))
        self.ln = nn.LayerNorm(c.d_model)
        self.head = nn.Linear(c.d_model, c.vocab)

    def forward(self, ids):
        """Training: ids [B, T] -> logits [B, T, V]."""
        pos = torch.arange(ids.shape[1], device=ids.device)
        x = self.tok(ids) + self.pos(pos)
        for block in self.blocks:
            x, _, _ = block(x)
        return self.head(self.ln(x))

    @torch.no_grad()
    def step(self, tokens, cache, extra=None):
        """Decoding one sequence: feeds ``tokens`` (a list or 1-D tensor of m
        ids) after the ``cache`` positions ([n, L, 2, H, hd], n may be 0) and
        ``extra`` ([e, L, 2, H, hd] speculative positions after the cache, or
        None). Returns (logits [m, V], new KV rows [m, L, 2, H, hd])."""
        c = self.c
        device = self.head.weight.device
        ids = torch.as_tensor(tokens, dtype=torch.long, device=device).view(1, -1)
        past = cache if extra is None or extra.shape[0] == 0 else torch.cat([cache, extra])
        n = past.shape[0]
        m = ids.shape[1]
        if n + m > c.max_len:
            raise ValueError(f"sequence of {n + m} positions exceeds max_len {c.max_len}")
        pos = torch.arange(n, n + m, device=device)
        x = self.tok(ids) + self.pos(pos)
        rows = torch.empty(m, c.n_layers, 2, c.n_heads, c.head_dim, dtype=x.dtype, device=device)
        for layer, block in enumerate(self.blocks):
            if n:
                # [n, H, hd] -> [1, H, n, hd]
                pk = past[:, layer, 0].transpose(0, 1).unsqueeze(0)
                pv = past[:, layer, 1].transpose(0, 1).unsqueeze(0)
            else:
                pk = pv = None
            x, k, v = block(x, pk, pv)
            rows[:, layer, 0] = k[0].transpose(0, 1)
            rows[:, layer, 1] = v[0].transpose(0, 1)
        return self.head(self.ln(x))[0], rows

    def empty_cache(self, capacity):
        c = self.c
        return torch.empty(capacity, c.n_layers, 2, c.n_heads, c.head_dim,
                           dtype=self.head.weight.dtype, device=self.head.weight.device)


# Model shapes and training budgets. "ci": seconds of training on a busy
# 2-core CPU (the CTest run); "full": the GPU report's models, trained on the
# GPU in well under a minute.
PRESETS = {
    "ci": {
        "target": (dict(d_model=64, n_layers=2, n_heads=4, d_ff=256),
                   TrainConfig(steps=150, batch=16, context=48, lr=1e-2, seed=0)),
        "draft": (dict(d_model=32, n_layers=1, n_heads=2, d_ff=128),
                  TrainConfig(steps=60, batch=16, context=48, lr=1e-2, seed=1)),
    },
    "full": {
        # The target is deep (8 layers) and the draft shallow (1 layer): on a
        # GPU both are launch-bound at batch 1, so their cost ratio is about
        # their depth ratio, which is what speculation trades on.
        "target": (dict(d_model=384, n_layers=8, n_heads=8, d_ff=1536),
                   TrainConfig(steps=3000, batch=64, context=128, lr=1e-3, seed=0)),
        "draft": (dict(d_model=128, n_layers=1, n_heads=4, d_ff=512),
                  TrainConfig(steps=2000, batch=64, context=128, lr=3e-3, seed=1)),
    },
}


def train(model, corpus, tc, log=None, device="cpu"):
    """AdamW on random windows of the corpus for tc.steps steps (fixed
    seed) on ``device``. Returns the last loss (nats per symbol)."""
    gen = torch.Generator().manual_seed(tc.seed)
    model.to(device)
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr, weight_decay=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, tc.steps)
    ids = corpus.ids.to(device)
    loss = None
    for step in range(tc.steps):
        starts = torch.randint(0, len(ids) - tc.context - 1, (tc.batch,), generator=gen)
        window = ids[starts.to(ids.device)[:, None] + torch.arange(tc.context + 1,
                                                                    device=ids.device)]
        logits = model(window[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]), window[:, 1:].reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        if log and (step % 100 == 0 or step == tc.steps - 1):
            log(f"  step {step:4d} loss {loss.item():.3f}")
    return float(loss.item())


def cache_dir():
    return os.environ.get("SPECVERIFY_WORKER_CACHE") or os.path.join(
        os.path.expanduser("~"), ".cache", "specverify-worker")


def load_or_train(name, shape, tc, corpus, log=print, device="cpu"):
    """The model ``name`` with ``shape`` trained by ``tc`` on ``corpus``:
    from the weight cache when a file with the same key exists, else trained
    now (seconds on a CPU) and cached. The key hashes the shapes, the
    training settings, the corpus and the torch version (training is only
    reproducible within one version and kind of device). Returns the model
    on the CPU, in eval mode, and what happened."""
    config = ModelConfig(vocab=corpus.vocab, **shape)
    key = hashlib.sha256(repr((name, asdict(config), asdict(tc), corpus.sha256,
                               torch.__version__, torch.device(device).type)
                              ).encode()).hexdigest()[:16]
    path = os.path.join(cache_dir(), f"{name}-{key}.pt")
    torch.manual_seed(tc.seed)
    model = TinyLM(config)
    if os.path.exists(path):
        model.load_state_dict(torch.load(path, map_location="cpu"))
        log(f"{name}: loaded {path}")
        return model.eval(), {"cached": True, "path": path}
    log(f"{name}: training {sum(p.numel() for p in model.parameters())} parameters, "
        f"{tc.steps} steps on {CORPUS}")
    start = time.monotonic()
    loss = train(model, corpus, tc, log, device)
    if torch.device(device).type == "cuda":
        torch.cuda.synchronize()
    seconds = time.monotonic() - start
    model.cpu()
    os.makedirs(cache_dir(), exist_ok=True)
    tmp = f"{path}.{os.getpid()}.tmp"
    torch.save(model.state_dict(), tmp)
    os.replace(tmp, path)  # atomic: concurrent trainers write the same bytes
    log(f"{name}: loss {loss:.3f} after {seconds:.1f} s, cached at {path}")
    return model.eval(), {"cached": False, "path": path, "loss": loss, "seconds": seconds}
