// Process checks shared by the tests that kill processes and look for what
// is left (the CPU compiler's unit tests, the integration tests).
#ifndef YIRAGE_TESTS_PROCESS_UTIL_H_
#define YIRAGE_TESTS_PROCESS_UTIL_H_

#include <sys/types.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

namespace yirage::testing {

// The process exists and is not a zombie waiting for its reaper.
inline bool ProcessRunning(pid_t pid) {
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  const size_t paren = line.rfind(')');
  return paren != std::string::npos && paren + 2 < line.size() && line[paren + 2] != 'Z';
}

// Whether `pid` stops running within `limit`.
inline bool ProcessGoneWithin(pid_t pid, std::chrono::seconds limit) {
  for (auto until = std::chrono::steady_clock::now() + limit;
       std::chrono::steady_clock::now() < until;) {
    if (!ProcessRunning(pid)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return !ProcessRunning(pid);
}

// The pid written to the file `path`, waiting up to `limit` for it; 0 if none.
inline pid_t PidFromFile(const std::string& path, std::chrono::seconds limit) {
  for (auto until = std::chrono::steady_clock::now() + limit;
       std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(20))) {
    std::ifstream in(path);
    pid_t pid = 0;
    if (in >> pid && pid > 0) return pid;
  }
  return 0;
}

}  // namespace yirage::testing

#endif  // YIRAGE_TESTS_PROCESS_UTIL_H_
