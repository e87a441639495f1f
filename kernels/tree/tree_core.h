// The per-decision formulas of sampled tree verification, shared verbatim by
// the CPU reference and the CUDA kernel (host + device), built from the
// det_math.h operations of the chain sampler so both sides produce the same
// bits. docs/TREES.md derives them.
//
// At a node with target row p and children c_1, c_2, ... (index order), the
// multi-candidate rule keeps an unnormalized residual R_k and its mass Z_k:
//   R_1 = p, Z_1 = 1 (rows are expected to be normalized, as in the chain)
//   try c_k: accept iff R_k(x) > 0 and u_{c_k} * q_k(x) * Z_k <= R_k(x), x = token of c_k
//   on rejection: R_{k+1}(y) = max(0, R_k(y) - float(Z_k) * q_k(y))  for every y
//                 Z_{k+1}    = sum_y R_{k+1}(y)      (draft rows: a pass over V in the
//                                                     fixed chunk order of rejection_core.h)
//                            = Z_k - R_k(x) + R_{k+1}(x)  (one-hot q, no draft rows)
// q_k is node c_k's draft row, or one-hot on its token without draft rows.
// With Z_1 = 1 the first child's test is the chain's AcceptDraft bit for bit,
// and R_2 is the chain's ResidualWeight(p, q).
#ifndef SPECVERIFY_KERNELS_TREE_TREE_CORE_H_
#define SPECVERIFY_KERNELS_TREE_TREE_CORE_H_

#include <cstdint>

#include "kernels/sampling/det_math.h"
#include "kernels/sampling/rejection_core.h"

namespace specverify::tree {

// SpecInfer's acceptance test min(1, p'/q) with p' = R / Z, as u * q * Z <= R
// in double; R > 0 required as in the chain (a token of zero residual is
// never accepted, whatever u * q * Z rounds to).
SV_HD bool AcceptChild(double coin, float residual, float q, double mass) {
  return residual > 0.0f &&
         detmath::MulD(coin, detmath::MulD(static_cast<double>(q), mass)) <= static_cast<double>(residual);
}

// R_{k+1}(y) from R_k(y), float(Z_k) and q_k(y).
SV_HD float ResidualStep(float residual, float mass_f, float q) {
  return rejection::ResidualWeight(residual, detmath::Mul(mass_f, q));
}

// Z_{k+1} for a one-hot q_k: only the rejected token's entry changes.
SV_HD double OneHotNextMass(double mass, float before, float after) {
  return detmath::AddD(detmath::AddD(mass, -static_cast<double>(before)), static_cast<double>(after));
}

// A residual mass the next sibling can be tested against: positive and
// finite. Otherwise (all residual mass gone, by rounding or unnormalized
// rows) the remaining siblings are not tried and the node emits.
SV_HD bool UsableMass(double mass) { return mass > 0.0 && mass <= 1.7976931348623157e308; }

// Target row (and race position) of a node: 0 for the root (node -1).
SV_HD uint32_t TargetRowOf(int32_t node) { return static_cast<uint32_t>(node + 1); }

}  // namespace specverify::tree

#endif  // SPECVERIFY_KERNELS_TREE_TREE_CORE_H_
