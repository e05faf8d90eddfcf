// Runs the system C++ compiler as a child process for the CPU backend.
#ifndef YIRAGE_BACKENDS_CPU_CPU_COMPILER_H_
#define YIRAGE_BACKENDS_CPU_CPU_COMPILER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace yirage::backends::cpu {

struct CompilerRun {
  bool ok = false;          // exited with status 0
  bool timed_out = false;   // killed when the timeout expired
  int exit_status = -1;     // exit code, or -signal when killed by a signal
  std::string diagnostics;  // everything the compiler wrote to stdout and stderr
  double seconds = 0;
};

// Thread-safe: holds only the compiler path.
class CpuCompiler {
 public:
  static constexpr double kDefaultTimeoutSeconds = 60;

  // `path` is a file name looked up in PATH or a path.
  explicit CpuCompiler(std::string path) : path_(std::move(path)) {}

  // The compiler the backend uses: $YIRAGE_CPU_COMPILER if set and non-empty,
  // else the compiler that built the backend (YIRAGE_CPU_COMPILER at build
  // time), else "c++".
  static std::string DefaultPath();

  // Flags for a generated translation unit (shared object, OpenMP, native ISA).
  static std::vector<std::string> Flags();

  const std::string& path() const { return path_; }

  // Compiles the C++ file `source` into the shared library `output`. The
  // compiler and its children are killed after `timeout_seconds` (<= 0 means
  // kDefaultTimeoutSeconds), and when the calling thread or its process dies
  // first (a SIGKILLed worker leaves no compiler running). `log` is a
  // writable scratch path for diagnostics. Returns an error only when the
  // compiler could not be started.
  // REQUIRES: the calling thread stays alive until it returns (Linux sends
  // the parent-death signal when the forking thread ends).
  absl::StatusOr<CompilerRun> CompileShared(const std::string& source, const std::string& output,
                                            const std::string& log, double timeout_seconds) const;

  // The first line of `<compiler> --version`; an error when the compiler is
  // missing or fails.
  absl::StatusOr<std::string> Version(const std::string& log) const;

  // What -march=native names on this machine (GCC: `-march=native -Q
  // --help=target`, e.g. "znver4"), the target exports default to; "" when
  // the compiler does not say (clang).
  std::string NativeMarch(const std::string& log) const;

 private:
  absl::StatusOr<CompilerRun> Run(const std::vector<std::string>& args, const std::string& log,
                                  double timeout_seconds) const;

  std::string path_;
};

// The -march name in the output of `g++ -march=native -Q --help=target`
// ("" when there is none).
std::string ParseNativeMarch(const std::string& help);

}  // namespace yirage::backends::cpu

#endif  // YIRAGE_BACKENDS_CPU_CPU_COMPILER_H_
