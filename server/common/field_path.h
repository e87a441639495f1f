// The name of a request field that a status message names, such as
// "sequences[3].sampled.target.values_ref": kept as its parts (string
// literals) and formatted only when a message needs it. Validating and
// resolving a request runs on every request before it is batched, and a
// valid request names no field: formatting each one eagerly cost a sampled
// request of 8 sequences ~6 of its ~9 us of validation on the build VM
// (bench/server/results/2026-11-28-lazy-field-names).
#ifndef SPECVERIFY_SERVER_COMMON_FIELD_PATH_H_
#define SPECVERIFY_SERVER_COMMON_FIELD_PATH_H_

#include <array>
#include <cstring>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"

namespace specverify::server {

class FieldPath {
 public:
  // A top-level field ("kv_output"); `name` must outlive the path (a literal).
  static FieldPath Root(const char* name) {
    FieldPath p;
    p.parts_[0] = name;
    p.size_ = 1;
    return p;
  }
  // "sequences[i]".
  static FieldPath Sequence(int i) {
    FieldPath p;
    p.sequence_ = i;
    return p;
  }

  // This path with `suffix` (a literal such as ".draft_tokens") appended.
  // The request's deepest field takes 4 parts; past kMaxParts the last part
  // is replaced, so an overlong path still names its field's end.
  FieldPath operator+(const char* suffix) const {
    FieldPath p = *this;
    p.parts_[p.size_ < kMaxParts ? p.size_++ : kMaxParts - 1] = suffix;
    return p;
  }

  bool EndsWith(std::string_view suffix) const {
    if (size_ == 0) return false;
    return std::string_view(parts_[size_ - 1]).ends_with(suffix);
  }

  std::string str() const {
    std::string s = sequence_ >= 0 ? absl::StrCat("sequences[", sequence_, "]") : std::string();
    for (int k = 0; k < size_; ++k) s += parts_[k];
    return s;
  }

 private:
  static constexpr int kMaxParts = 6;
  int sequence_ = -1;
  std::array<const char*, kMaxParts> parts_{};
  int size_ = 0;
};

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_COMMON_FIELD_PATH_H_
