#ifndef SPECVERIFY_PROTO_RUNTIME_VERSION_H_
#define SPECVERIFY_PROTO_RUNTIME_VERSION_H_

#include <string>

namespace specverify {

// "<project version>+<git commit>" as configured by CMake, e.g.
// "0.1.0+5829c56f0a1b": what GetServerInfo reports and what the programs'
// --version print. Below the server and the client, so that both say the
// same.
std::string VersionString();

}  // namespace specverify

#endif  // SPECVERIFY_PROTO_RUNTIME_VERSION_H_
