#ifndef SPECVERIFY_SERVER_APP_VERSION_H_
#define SPECVERIFY_SERVER_APP_VERSION_H_

#include <string>

namespace specverify::server {

// "<project version>+<git commit>" as configured by CMake, e.g. "0.1.0+5829c56".
std::string VersionString();

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_APP_VERSION_H_
