// Client-supplied strings quoted in error messages, bounded (issue #15).
//
// A status message travels in a gRPC trailer (grpc-message), and trailers
// share the connection's metadata limit (8 KiB by default): echoing an
// 8,000-character handle made the answer exceed it, and other calls on the
// same connection failed with it. Every client-supplied string that appears
// in an error message goes through EchoForMessage.
#ifndef SPECVERIFY_SERVER_COMMON_ECHO_H_
#define SPECVERIFY_SERVER_COMMON_ECHO_H_

#include <cstddef>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"

namespace specverify::server {

// Characters of (escaped) client text an error message quotes at most.
inline constexpr size_t kMaxEchoedChars = 64;

// `value` in double quotes, C-escaped (quotes, backslashes, control and
// non-ASCII bytes as \xNN, so the message stays printable ASCII), and when
// its escaped form is longer than kMaxEchoedChars, cut there (never inside
// an escape) with "..." and the full length: "abc...xyz..." (8000 bytes).
inline std::string EchoForMessage(absl::string_view value) {
  std::string out = "\"";
  size_t used = 0;
  bool cut = false;
  for (char c : value) {
    const std::string escaped = absl::CHexEscape(absl::string_view(&c, 1));
    if (used + escaped.size() > kMaxEchoedChars) {
      cut = true;
      break;
    }
    out += escaped;
    used += escaped.size();
  }
  if (!cut) return out + "\"";
  return absl::StrCat(out, "...\" (", value.size(), " bytes)");
}

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_COMMON_ECHO_H_
