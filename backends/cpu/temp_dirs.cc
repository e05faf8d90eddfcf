#include "backends/cpu/temp_dirs.h"

#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string_view>
#include <system_error>

namespace yirage::backends::cpu {

std::string TempRoot() {
  const char* tmp = std::getenv("TMPDIR");
  return (tmp != nullptr && tmp[0] != '\0') ? tmp : "/tmp";
}

int RemoveStaleModuleDirs(const std::string& root) {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root, ec)) {
    const std::string name = entry.path().filename().string();
    constexpr std::string_view kPrefix = "yirage_cpu_";
    if (name.rfind(kPrefix, 0) != 0) continue;
    const size_t end = name.find('_', kPrefix.size());
    if (end == std::string::npos) continue;
    const std::string digits = name.substr(kPrefix.size(), end - kPrefix.size());
    if (digits.empty() || digits.size() > 9 ||
        digits.find_first_not_of("0123456789") != std::string::npos) {
      continue;
    }
    const pid_t pid = static_cast<pid_t>(std::stol(digits));
    if (pid <= 0 || pid == getpid() || kill(pid, 0) == 0 || errno != ESRCH) continue;
    std::error_code rm;
    if (std::filesystem::remove_all(entry.path(), rm) > 0 && !rm) ++removed;
  }
  return removed;
}

}  // namespace yirage::backends::cpu
