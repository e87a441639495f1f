#include "server/app/socket_path_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

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

TEST_F(SocketPathLockTest, AMissingDirectoryIsAFailedPreconditionNamingTheFile) {
  const std::string socket_path = dir_ + "/absent/verifier.sock";
  EXPECT_THAT(SocketPathLock::Acquire("unix:" + socket_path, socket_path),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       HasSubstr("cannot lock " + socket_path + ".lock for unix:" + socket_path +
                                 " (--listen_address): No such file or directory")));
}

}  // namespace
}  // namespace specverify::server
