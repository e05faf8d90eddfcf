#include "backends/cpu/temp_dirs.h"

#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace yirage::backends::cpu {
namespace {

// The folders a killed worker left are removed; those of live processes
// (this one, pid 1), foreign names and malformed pids stay.
TEST(TempDirsTest, StaleFoldersOfDeadProcessesAreRemoved) {
  const std::filesystem::path root =
      std::filesystem::temp_directory_path() / ("yirage_stale_test_" + std::to_string(getpid()));
  std::filesystem::remove_all(root);
  std::filesystem::create_directories(root);
  const pid_t child = fork();
  if (child == 0) _exit(0);
  ASSERT_GT(child, 0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);  // reaped: no process `child` now
  const std::string dead = "yirage_cpu_" + std::to_string(child) + "_abc123";
  const std::vector<std::string> kept = {"yirage_cpu_" + std::to_string(getpid()) + "_def456",
                                         "yirage_cpu_1_ghi789", "yirage_cpu_x1_jkl", "yirage_cpu_",
                                         "something_else"};
  std::filesystem::create_directories(root / dead / "nested");
  for (const std::string& k : kept) std::filesystem::create_directories(root / k);
  EXPECT_EQ(RemoveStaleModuleDirs(root.string()), 1);
  EXPECT_FALSE(std::filesystem::exists(root / dead));
  for (const std::string& k : kept) EXPECT_TRUE(std::filesystem::exists(root / k)) << k;
  EXPECT_EQ(RemoveStaleModuleDirs((root / "missing").string()), 0);
  std::filesystem::remove_all(root);
}

}  // namespace
}  // namespace yirage::backends::cpu
