// Where the CPU backend compiles (per-module folders under $TMPDIR), and the
// removal of folders that killed workers left behind.
#ifndef YIRAGE_BACKENDS_CPU_TEMP_DIRS_H_
#define YIRAGE_BACKENDS_CPU_TEMP_DIRS_H_

#include <string>

namespace yirage::backends::cpu {

// $TMPDIR, or /tmp.
std::string TempRoot();

// Removes the yirage_cpu_<pid>_* folders under `root` whose process is gone
// (a worker killed before it could clean up); returns how many. A folder
// whose pid another process took since stays until that one is gone too.
int RemoveStaleModuleDirs(const std::string& root);

}  // namespace yirage::backends::cpu

#endif  // YIRAGE_BACKENDS_CPU_TEMP_DIRS_H_
