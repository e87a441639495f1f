#include "server/rpc/protobuf_log.h"

#include <cstdio>
#include <mutex>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "google/protobuf/stubs/logging.h"

namespace specverify::server {
namespace {

LogRateLimiter& Limiter() {
  static auto* limiter = new LogRateLimiter(kProtobufLogInterval);
  return *limiter;
}

const char* LevelName(google::protobuf::LogLevel level) {
  switch (level) {
    case google::protobuf::LOGLEVEL_INFO:
      return "INFO";
    case google::protobuf::LOGLEVEL_WARNING:
      return "WARNING";
    case google::protobuf::LOGLEVEL_ERROR:
      return "ERROR";
    default:
      return "FATAL";
  }
}

// The format of protobuf's default handler, plus the count of suppressed lines.
void RateLimitedHandler(google::protobuf::LogLevel level, const char* filename, int line,
                        const std::string& message) {
  int64_t suppressed = 0;
  if (level < google::protobuf::LOGLEVEL_FATAL &&
      !Limiter().Admit(absl::StrCat(filename, ":", line), absl::Now(), &suppressed)) {
    return;
  }
  const std::string note =
      suppressed > 0 ? absl::StrCat(" [", suppressed, " more like this suppressed since the last; ",
                                    "at most one per ", absl::FormatDuration(kProtobufLogInterval),
                                    "]")
                     : std::string();
  std::fprintf(stderr, "[libprotobuf %s %s:%d] %s%s\n", LevelName(level), filename, line,
               message.c_str(), note.c_str());
  std::fflush(stderr);
}

}  // namespace

bool LogRateLimiter::Admit(absl::string_view site, absl::Time now, int64_t* suppressed) {
  absl::MutexLock lock(&mu_);
  Site& s = sites_[site];
  if (now - s.last_printed < interval_) {
    ++s.suppressed;
    return false;
  }
  *suppressed = s.suppressed;
  s.suppressed = 0;
  s.last_printed = now;
  return true;
}

void InstallRateLimitedProtobufLogging() {
  static std::once_flag once;
  std::call_once(once, [] { google::protobuf::SetLogHandler(&RateLimitedHandler); });
}

}  // namespace specverify::server
