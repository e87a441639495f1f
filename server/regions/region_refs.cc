#include "server/regions/region_refs.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "server/common/data_type.h"
#include "server/common/echo.h"
#include "server/common/field_path.h"

namespace specverify::server {
namespace {

int64_t TensorBytes(const v1::TensorRef& ref) {
  int64_t n = DataTypeSize(ref.dtype());  // validated: > 0
  for (int64_t d : ref.shape()) n *= d;  // validation bounded the product
  return n;
}

// One referenced range, for the overlap check.
struct Range {
  const Region* region;
  int64_t begin, end;
  FieldPath field;
};

class Resolver {
 public:
  // `track_ranges`: keep every resolved range for CheckOutputOverlap (a
  // request with kv_output); others need none kept.
  Resolver(RegionRegistry& registry, const std::string& owner, ResolvedRegions* out,
           bool track_ranges)
      : registry_(registry), owner_(owner), out_(out), track_ranges_(track_ranges) {}

  // The address of `ref`'s first byte; checks its range against its region.
  absl::StatusOr<std::byte*> Resolve(const v1::TensorRef& ref, const FieldPath& field) {
    const Region* region = nullptr;
    for (const RegionUse& use : out_->uses) {
      if (use->spec().name == ref.region()) region = use.get();
    }
    if (region == nullptr) {
      absl::StatusOr<RegionUse> use =
          registry_.Acquire(owner_, ref.region(), (field + ".region").str());
      if (!use.ok()) return use.status();
      region = use->get();
      out_->uses.push_back(*std::move(use));
    }
    const int64_t bytes = TensorBytes(ref);
    const int64_t size = region->spec().byte_size;
    if (ref.offset_bytes() > size || bytes > size - ref.offset_bytes()) {
      return absl::OutOfRangeError(absl::StrCat(
          field.str(), ": bytes [", ref.offset_bytes(), ", ", ref.offset_bytes() + bytes,
          ") run past the end of region ", EchoForMessage(ref.region()), " (", size, " bytes)"));
    }
    if (track_ranges_) {
      ranges_.push_back(Range{region, ref.offset_bytes(), ref.offset_bytes() + bytes, field});
    }
    // Null: the backend accepted the region without mapping it (the no-op
    // ceiling's CUDA regions); it never dereferences these addresses.
    return region->address() == nullptr ? nullptr : region->address() + ref.offset_bytes();
  }

  // The output range (the last one resolved) against every input range.
  absl::Status CheckOutputOverlap() const {
    const Range& out = ranges_.back();
    for (size_t i = 0; i + 1 < ranges_.size(); ++i) {
      const Range& in = ranges_[i];
      if (in.region == out.region && in.begin < out.end && out.begin < in.end) {
        return absl::InvalidArgumentError(absl::StrCat(
            "kv_output [", out.begin, ", ", out.end, ") overlaps ", in.field.str(), " [", in.begin,
            ", ", in.end, ") in region ", EchoForMessage(in.region->spec().name),
            "; the packed rows must not overwrite an input"));
      }
    }
    return absl::OkStatus();
  }

 private:
  RegionRegistry& registry_;
  const std::string& owner_;
  ResolvedRegions* out_;
  const bool track_ranges_;
  std::vector<Range> ranges_;
};

}  // namespace

bool UsesRegions(const v1::VerifyRequest& request) {
  if (request.has_kv_output()) return true;
  for (const v1::SequenceDraft& seq : request.sequences()) {
    if (seq.has_draft_kv_ref()) return true;
    if (seq.has_sampled() && (seq.sampled().target().has_values_ref() ||
                              seq.sampled().draft().has_values_ref())) {
      return true;
    }
  }
  return false;
}

absl::StatusOr<ResolvedRegions> ResolveRegionRefs(const v1::VerifyRequest& request,
                                                  RegionRegistry& registry,
                                                  const std::string& owner) {
  ResolvedRegions out;
  Resolver resolver(registry, owner, &out, request.has_kv_output());
  const int n = request.sequences_size();
  for (int i = 0; i < n; ++i) {
    const v1::SequenceDraft& seq = request.sequences(i);
    if (seq.has_draft_kv_ref()) {
      absl::StatusOr<std::byte*> a =
          resolver.Resolve(seq.draft_kv_ref(), FieldPath::Sequence(i) + ".draft_kv_ref");
      if (!a.ok()) return a.status();
      out.kv.resize(n);
      out.kv[i] = *a;
    }
    if (!seq.has_sampled()) continue;
    const v1::SampledTarget& st = seq.sampled();
    if (st.target().has_values_ref()) {
      absl::StatusOr<std::byte*> a =
          resolver.Resolve(st.target().values_ref(),
                           FieldPath::Sequence(i) + ".sampled.target.values_ref");
      if (!a.ok()) return a.status();
      out.target.resize(n);
      out.target[i] = *a;
    }
    if (st.has_draft() && st.draft().has_values_ref()) {
      absl::StatusOr<std::byte*> a =
          resolver.Resolve(st.draft().values_ref(),
                           FieldPath::Sequence(i) + ".sampled.draft.values_ref");
      if (!a.ok()) return a.status();
      out.draft.resize(n);
      out.draft[i] = *a;
    }
  }
  if (request.has_kv_output()) {
    absl::StatusOr<std::byte*> a =
        resolver.Resolve(request.kv_output(), FieldPath::Root("kv_output"));
    if (!a.ok()) return a.status();
    if (absl::Status s = resolver.CheckOutputOverlap(); !s.ok()) return s;
    out.kv_output = *a;
    out.kv_output_bytes = TensorBytes(request.kv_output());
  }
  return out;
}

}  // namespace specverify::server
