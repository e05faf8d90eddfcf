// A fresh, empty folder for the running GoogleTest test (its database and
// files): under the system temp folder, named by prefix, process id and test.
#ifndef YIRAGE_SERVER_TEST_DIR_H_
#define YIRAGE_SERVER_TEST_DIR_H_

#include <unistd.h>

#include <filesystem>
#include <string>

#include "gtest/gtest.h"

namespace yirage::server {

inline std::filesystem::path FreshTestDir(const std::string& prefix) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() /
      (prefix + "_" + std::to_string(getpid()) + "_" +
       ::testing::UnitTest::GetInstance()->current_test_info()->name());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_TEST_DIR_H_
