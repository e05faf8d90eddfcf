#include "backends/cpu/cpu_compiler.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

extern char** environ;

namespace yirage::backends::cpu {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

std::string CpuCompiler::DefaultPath() {
  if (const char* env = std::getenv("YIRAGE_CPU_COMPILER"); env != nullptr && env[0] != '\0') {
    return env;
  }
#ifdef YIRAGE_CPU_COMPILER
  return YIRAGE_CPU_COMPILER;
#else
  return "c++";
#endif
}

std::vector<std::string> CpuCompiler::Flags() {
  return {"-std=c++17",         "-O3",     "-march=native", "-fopenmp", "-fno-math-errno",
          "-ffp-contract=fast", "-shared", "-fPIC",         "-w"};
}

absl::StatusOr<CompilerRun> CpuCompiler::CompileShared(const std::string& source,
                                                       const std::string& output,
                                                       const std::string& log,
                                                       double timeout_seconds) const {
  std::vector<std::string> args = {path_};
  for (const std::string& f : Flags()) args.push_back(f);
  args.insert(args.end(), {"-o", output, source});
  return Run(args, log, timeout_seconds);
}

absl::StatusOr<std::string> CpuCompiler::Version(const std::string& log) const {
  absl::StatusOr<CompilerRun> run = Run({path_, "--version"}, log, 20);
  if (!run.ok()) return run.status();
  if (!run->ok) {
    return absl::FailedPreconditionError(
        absl::StrCat("'", path_, " --version' failed (status ", run->exit_status, ")",
                     run->timed_out ? " (timed out)" : "", ": ", run->diagnostics));
  }
  return run->diagnostics.substr(0, run->diagnostics.find('\n'));
}

absl::StatusOr<CompilerRun> CpuCompiler::Run(const std::vector<std::string>& args,
                                             const std::string& log, double timeout_seconds) const {
  if (timeout_seconds <= 0) timeout_seconds = kDefaultTimeoutSeconds;
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  // Own process group, so a timeout kills the driver and cc1plus/as/ld alike;
  // default signal dispositions and an empty mask whatever the caller uses.
  sigset_t empty, defaults;
  sigemptyset(&empty);
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  sigaddset(&defaults, SIGTERM);
  sigaddset(&defaults, SIGINT);
  posix_spawnattr_setsigmask(&attr, &empty);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setpgroup(&attr, 0);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);

  const auto start = std::chrono::steady_clock::now();
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, argv[0], &actions, &attr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start compiler '", path_, "': ", std::strerror(rc)));
  }

  CompilerRun result;
  int status = 0;
  const auto deadline = start + std::chrono::duration<double>(timeout_seconds);
  auto sleep = std::chrono::microseconds(500);
  for (;;) {
    const pid_t w = waitpid(pid, &status, WNOHANG);
    if (w == pid) break;
    if (w < 0 && errno != EINTR) {
      return absl::InternalError(absl::StrCat("waitpid: ", std::strerror(errno)));
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      result.timed_out = true;
      kill(-pid, SIGKILL);
      kill(pid, SIGKILL);
      while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(sleep);
    if (sleep < std::chrono::milliseconds(20)) sleep *= 2;
  }
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (WIFEXITED(status)) {
    result.exit_status = WEXITSTATUS(status);
  } else if (WIFSIGNALED(status)) {
    result.exit_status = -WTERMSIG(status);
  }
  result.ok = !result.timed_out && WIFEXITED(status) && WEXITSTATUS(status) == 0;
  result.diagnostics = ReadFile(log);
  if (result.timed_out) {
    absl::StrAppend(&result.diagnostics, "\ncompiler killed after ", timeout_seconds,
                    " s (timeout)");
  }
  // posix_spawnp reports a missing executable through exit status 127.
  if (!result.ok && !result.timed_out && result.exit_status == 127 && result.diagnostics.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run compiler '", path_, "'"));
  }
  return result;
}

}  // namespace yirage::backends::cpu
