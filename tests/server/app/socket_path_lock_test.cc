#include "server/app/socket_path_lock.h"

#include <fcntl.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/status_matchers.h"

namespace specverify::server {
namespace {

using ::specverify::testing::IsOk;
using ::specverify::testing::StatusIs;
using ::testing::HasSubstr;

class SocketPathLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/specverify-lock-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr) << std::strerror(errno);
    dir_ = pattern;
    socket_path_ = dir_ + "/verifier.sock";
    address_ = "unix:" + socket_path_;
    lock_path_ = socket_path_ + ".lock";
  }
  void TearDown() override {
    unlink(lock_path_.c_str());
    EXPECT_EQ(rmdir(dir_.c_str()), 0) << "left in " << dir_ << ": " << std::strerror(errno);
  }
  bool LockFileExists() const {
    struct stat st {};
    return stat(lock_path_.c_str(), &st) == 0;
  }

  std::string dir_, socket_path_, address_, lock_path_;
};

TEST_F(SocketPathLockTest, TheLockFileSitsBesideTheSocket) {
  EXPECT_EQ(SocketLockPath("/run/specverify/verifier.sock"), "/run/specverify/verifier.sock.lock");
}

TEST_F(SocketPathLockTest, ASecondHolderIsRefusedNamingTheFile) {
  absl::StatusOr<SocketPathLock> first = SocketPathLock::Acquire(address_, socket_path_);
  ASSERT_THAT(first, IsOk());
  EXPECT_TRUE(first->held());
  EXPECT_TRUE(LockFileExists());
  // flock conflicts between open file descriptions, so a second acquisition
  // in this process stands for a second server.
  EXPECT_THAT(SocketPathLock::Acquire(address_, socket_path_),
              StatusIs(absl::StatusCode::kUnavailable,
                       HasSubstr("cannot listen on " + address_ +
                                 " (--listen_address): another process holds " + lock_path_)));
}

TEST_F(SocketPathLockTest, ReleaseRemovesTheFileAndLetsTheNextServerIn) {
  absl::StatusOr<SocketPathLock> first = SocketPathLock::Acquire(address_, socket_path_);
  ASSERT_THAT(first, IsOk());
  first->Release();
  EXPECT_FALSE(first->held());
  EXPECT_FALSE(LockFileExists());
  first->Release();  // idempotent
  absl::StatusOr<SocketPathLock> second = SocketPathLock::Acquire(address_, socket_path_);
  EXPECT_THAT(second, IsOk());
}

TEST_F(SocketPathLockTest, TheDestructorReleasesAndAMoveDoesNot) {
  {
    absl::StatusOr<SocketPathLock> lock = SocketPathLock::Acquire(address_, socket_path_);
    ASSERT_THAT(lock, IsOk());
    SocketPathLock moved = *std::move(lock);
    EXPECT_TRUE(moved.held());
    EXPECT_TRUE(LockFileExists());
    EXPECT_THAT(SocketPathLock::Acquire(address_, socket_path_),
                StatusIs(absl::StatusCode::kUnavailable, HasSubstr(lock_path_)));
  }
  EXPECT_FALSE(LockFileExists());
  EXPECT_THAT(SocketPathLock::Acquire(address_, socket_path_), IsOk());
}

// A server that was killed leaves its lock file behind, unlocked: the next
// one takes it without any clean-up.
TEST_F(SocketPathLockTest, AFileLeftByADeadHolderIsTaken) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    const int fd = open(lock_path_.c_str(), O_RDWR | O_CREAT, 0600);
    _exit(fd >= 0 && flock(fd, LOCK_EX) == 0 ? 0 : 1);  // dies holding it
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_TRUE(LockFileExists());
  EXPECT_THAT(SocketPathLock::Acquire(address_, socket_path_), IsOk());
}

// A server that opened the lock file just before its holder released it
// ends up locking an unlinked file: that lock must stop nobody, and the
// next server gets a fresh file.
TEST_F(SocketPathLockTest, ALockOnAnUnlinkedFileBlocksNobody) {
  absl::StatusOr<SocketPathLock> holder = SocketPathLock::Acquire(address_, socket_path_);
  ASSERT_THAT(holder, IsOk());
  // What a racing server would have opened before the holder let go.
  const int stale = open(lock_path_.c_str(), O_RDWR);
  ASSERT_GE(stale, 0);
  holder->Release();
  ASSERT_EQ(flock(stale, LOCK_EX | LOCK_NB), 0);  // the unlinked file locks
  absl::StatusOr<SocketPathLock> next = SocketPathLock::Acquire(address_, socket_path_);
  ASSERT_THAT(next, IsOk());
  struct stat named {};
  struct stat old {};
  ASSERT_EQ(stat(lock_path_.c_str(), &named), 0);
  ASSERT_EQ(fstat(stale, &old), 0);
  EXPECT_NE(named.st_ino, old.st_ino);  // a fresh file, not the unlinked one
  close(stale);
}

// A server killed while it held the lock leaves PATH.lock behind, owned by
// its user. A restart by another member of the file's group (a setgid
// socket directory shared by a service group) takes it over, reading being
// enough for flock; a user outside the group can neither open nor lock it.
// Needs root to act as the other users.
TEST_F(SocketPathLockTest, AGroupMemberTakesOverAFileAnotherUserLeftAndOthersCannot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to switch users: cross-user lock take-over not tested";
  constexpr gid_t kServiceGroup = 65534;
  constexpr uid_t kMember = 65534;
  constexpr uid_t kOutsider = 65533;
  ASSERT_EQ(chown(dir_.c_str(), 0, kServiceGroup), 0) << std::strerror(errno);
  ASSERT_EQ(chmod(dir_.c_str(), 02775), 0) << std::strerror(errno);  // files inherit the group
  const auto run_child = [](const std::function<int()>& body) {
    const pid_t child = fork();
    if (child == 0) _exit(body());
    int status = 0;
    if (child < 0 || waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
    return WEXITSTATUS(status);
  };
  const auto die_holding_the_lock = [&] {
    umask(022);
    absl::StatusOr<SocketPathLock> lock = SocketPathLock::Acquire(address_, socket_path_);
    if (lock.ok()) _exit(0);  // dies holding it: no Release, the file stays
    return 1;
  };
  const auto become = [](uid_t uid, gid_t gid) {
    return setgroups(1, &gid) == 0 && setgid(gid) == 0 && setuid(uid) == 0;
  };

  ASSERT_EQ(run_child(die_holding_the_lock), 0);
  struct stat left {};
  ASSERT_EQ(stat(lock_path_.c_str(), &left), 0);
  EXPECT_EQ(left.st_uid, 0u);
  EXPECT_EQ(left.st_gid, kServiceGroup);
  EXPECT_EQ(left.st_mode & 0777, 0640u);
  EXPECT_EQ(run_child([&] {
              if (!become(kMember, kServiceGroup)) return 10;
              absl::StatusOr<SocketPathLock> lock = SocketPathLock::Acquire(address_, socket_path_);
              if (!lock.ok()) {
                std::fprintf(stderr, "member: %s\n", lock.status().ToString().c_str());
                return 11;
              }
              lock->Release();
              return LockFileExists() ? 12 : 0;
            }),
            0);

  const auto outsider_is_refused = [&] {
    if (!become(kOutsider, kOutsider)) return 10;
    absl::StatusOr<SocketPathLock> lock = SocketPathLock::Acquire(address_, socket_path_);
    if (lock.ok()) return 11;
    return lock.status().code() == absl::StatusCode::kFailedPrecondition &&
                   absl::StrContains(lock.status().message(), "Permission denied")
               ? 0
               : 12;
  };
  ASSERT_EQ(run_child(die_holding_the_lock), 0);
  EXPECT_EQ(run_child(outsider_is_refused), 0);
  // No file, and a directory the outsider may not write into: still
  // "Permission denied", not the read-only retry's "No such file".
  ASSERT_EQ(unlink(lock_path_.c_str()), 0);
  EXPECT_EQ(run_child(outsider_is_refused), 0);
}

TEST_F(SocketPathLockTest, AMissingDirectoryIsAFailedPreconditionNamingTheFile) {
  const std::string socket_path = dir_ + "/absent/verifier.sock";
  EXPECT_THAT(SocketPathLock::Acquire("unix:" + socket_path, socket_path),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot lock " + socket_path + ".lock for unix:" + socket_path +
                                 " (--listen_address): No such file or directory")));
}

}  // namespace
}  // namespace specverify::server
