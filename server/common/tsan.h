// Happens-before edges that gRPC guarantees but ThreadSanitizer cannot see
// (scripts/tsan.sh). gRPC core is not instrumented, so TSan does not see
// that a reactor's callback (OnReadDone, OnWriteDone, OnDone) runs after
// the operation that led to it (StartRead, StartWrite, Finish) was handed
// to gRPC on another thread, and reports the reactor's own members as raced.
// A reactor calls ReleaseToGrpc(this) right before handing gRPC an
// operation and AcquireFromGrpc(this) first thing in each callback: TSan
// then checks the reactor's state against exactly the order gRPC promises,
// and still reports an access made after the hand-off. No-ops unless built
// with -fsanitize=thread.
#ifndef SPECVERIFY_SERVER_COMMON_TSAN_H_
#define SPECVERIFY_SERVER_COMMON_TSAN_H_

#if defined(__SANITIZE_THREAD__)
#define SPECVERIFY_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define SPECVERIFY_TSAN 1
#endif
#endif

#ifdef SPECVERIFY_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace specverify::server {

inline void ReleaseToGrpc(const void* object) {
#ifdef SPECVERIFY_TSAN
  __tsan_release(const_cast<void*>(object));
#else
  (void)object;
#endif
}

inline void AcquireFromGrpc(const void* object) {
#ifdef SPECVERIFY_TSAN
  __tsan_acquire(const_cast<void*>(object));
#else
  (void)object;
#endif
}

}  // namespace specverify::server

#endif  // SPECVERIFY_SERVER_COMMON_TSAN_H_
