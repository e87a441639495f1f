// Resolves a validated request's TensorRefs against the registry: every
// referenced range lies inside its region, the output does not overlap an
// input, and the request holds each region it uses (RegionUse) until it has
// been answered. The result is addresses in the backend's space, per
// sequence, which the batch builder writes into the batch's row tables.
#ifndef SPECVERIFY_SERVER_REGIONS_REGION_REFS_H_
#define SPECVERIFY_SERVER_REGIONS_REGION_REFS_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "server/regions/region_registry.h"
#include "specverify/v1/verifier.pb.h"

namespace specverify::server {

struct ResolvedRegions {
  std::vector<RegionUse> uses;            // one per distinct region referenced
  // Per sequence, the first byte of its rows (empty when inline).
  std::vector<const std::byte*> kv;       // draft KV rows, [gamma][row_bytes]
  std::vector<const std::byte*> target;   // target rows, [gamma + 1][V]
  std::vector<const std::byte*> draft;    // draft rows, [gamma][V] (with draft probs)
  std::byte* kv_output = nullptr;         // KV_RETURN_REGION
  int64_t kv_output_bytes = 0;

  bool empty() const { return uses.empty(); }
};

// REQUIRES: `request` passed ValidateVerifyRequest (shapes, dtypes, offset
// alignment). NOT_FOUND names the field of an unknown region (or one of
// another identity); OUT_OF_RANGE one that runs past its region's end;
// INVALID_ARGUMENT an output overlapping an input.
absl::StatusOr<ResolvedRegions> ResolveRegionRefs(const v1::VerifyRequest& request,
                                                  RegionRegistry& registry,
                                                  const std::string& owner);

// True when the request names any region (so ResolveRegionRefs has work).
bool UsesRegions(const v1::VerifyRequest& request);

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_REGIONS_REGION_REFS_H_
