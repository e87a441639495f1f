#include "proto/runtime/version.h"

#ifndef SPECVERIFY_VERSION
#error "SPECVERIFY_VERSION must be defined by the build"
#endif
#include "git_commit.h"  // generated at build time: SPECVERIFY_GIT_COMMIT

namespace specverify {

std::string VersionString() {
  return std::string(SPECVERIFY_VERSION) + "+" + SPECVERIFY_GIT_COMMIT;
}

}  // namespace specverify
