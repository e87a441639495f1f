// fork() for tests whose children must never outlive them (issue #15): a
// server or helper forked by a test that then dies (crash, SIGKILL from a
// CTest timeout, an abort) would keep running, hold its port and make CTest
// wait for its own timeout. The child asks the kernel for SIGKILL when its
// parent dies (PR_SET_PDEATHSIG, kept across execv) and closes the race with
// a parent that died before that request by comparing getppid() with the
// parent's pid saved before fork().
//
// PR_SET_PDEATHSIG fires when the *thread* that forked exits, not only the
// process: fork from a thread that outlives the child (the test's main
// thread, SetUp/SetUpTestSuite), never from a short-lived worker thread.
#ifndef SPECVERIFY_TESTS_TESTING_SUBPROCESS_H_
#define SPECVERIFY_TESTS_TESTING_SUBPROCESS_H_

#include <signal.h>
#include <sys/prctl.h>
#include <sys/types.h>
#include <unistd.h>

namespace specverify::testing {

// Exit status of a child that found its parent already gone.
inline constexpr int kOrphanedChildExitCode = 125;

// Like fork(): the child's pid in the parent, 0 in the child, -1 on failure.
// In the child only async-signal-safe calls are made before returning.
inline pid_t ForkTiedToParent() {
  const pid_t parent = ::getpid();
  const pid_t pid = ::fork();
  if (pid == 0) {
    if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0) ::_exit(kOrphanedChildExitCode);
    // The parent died between fork() and prctl(): no signal will come.
    if (::getppid() != parent) ::_exit(kOrphanedChildExitCode);
  }
  return pid;
}

}  // namespace specverify::testing

#endif  // SPECVERIFY_TESTS_TESTING_SUBPROCESS_H_
