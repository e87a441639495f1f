"""Workloads with their own answers, for the Python client tests.

Greedy (seed 000): k = first j < gamma with draft[j] != target[j], else gamma;
next = target[k]; the packed rows are each sequence's draft_kv[0:k], in
sequence order.

Sampled, deterministic cases: with a deterministic drafter (no draft
probabilities, q one-hot on the draft token) the rule "accept x_j iff
u_j * 1 <= p_j(x_j)" accepts surely when p_j(x_j) = 1 and rejects surely when
p_j(x_j) = 0 (u_j > 0); the next token is then drawn from normalize(max(0,
p_k - q_k)), which is p_k itself when p_k is one-hot on a token other than
x_k. Such workloads have exact answers whatever the uniforms.
"""

from dataclasses import dataclass

import numpy as np


@dataclass
class GreedySequence:
    draft: np.ndarray  # [gamma] int32
    target: np.ndarray  # [gamma + 1] int32
    kv: np.ndarray  # [gamma, row] uint8
    accepted: int
    next_token: int


def greedy_sequence(rng, gamma, vocab, row_bytes, accept=None):
    """A sequence whose first mismatch is at ``accept`` (gamma = none;
    default: uniform in [0, gamma])."""
    if accept is None:
        accept = int(rng.integers(0, gamma + 1))
    draft = rng.integers(0, vocab, size=gamma, dtype=np.int32)
    target = np.empty(gamma + 1, dtype=np.int32)
    target[:gamma] = draft
    target[gamma] = rng.integers(0, vocab)
    if accept < gamma:
        target[accept] = (draft[accept] + 1 + rng.integers(0, vocab - 1)) % vocab
        # Positions after the mismatch are arbitrary: they must not matter.
        target[accept + 1:] = rng.integers(0, vocab, size=gamma - accept)
    kv = rng.integers(0, 256, size=(gamma, row_bytes), dtype=np.uint8)
    return GreedySequence(draft, target, kv, accept, int(target[accept]))


def packed_rows(sequences):
    return np.concatenate([s.kv[:s.accepted] for s in sequences], axis=0) \
        if any(s.accepted for s in sequences) else np.zeros((0, sequences[0].kv.shape[1]),
                                                            np.uint8)


def one_hot(vocab, token, dtype=np.float32):
    row = np.zeros(vocab, dtype=dtype)
    row[token] = 1
    return row


def deterministic_sampled(rng, gamma, vocab, accept):
    """(draft tokens [gamma], target probabilities [gamma+1, vocab], expected
    next token) for a deterministic drafter: p_j one-hot on x_j for j <
    accept, p_accept one-hot on a token != x_accept (or the bonus row when
    accept == gamma). Rows past ``accept`` are uniform: they must not
    matter."""
    draft = rng.integers(0, vocab, size=gamma, dtype=np.int32)
    target = np.full((gamma + 1, vocab), 1.0 / vocab, dtype=np.float32)
    for j in range(accept):
        target[j] = one_hot(vocab, draft[j])
    if accept < gamma:
        other = int((draft[accept] + 1 + rng.integers(0, vocab - 1)) % vocab)
    else:
        other = int(rng.integers(0, vocab))
    target[accept] = one_hot(vocab, other)
    return draft, target, other


def chi_square(counts, probabilities):
    """Pearson's statistic of observed counts against expected probabilities
    (cells of zero probability must have zero counts: checked separately)."""
    counts = np.asarray(counts, dtype=np.float64)
    n = counts.sum()
    mask = probabilities > 0
    expected = n * probabilities[mask]
    return float(((counts[mask] - expected) ** 2 / expected).sum())
