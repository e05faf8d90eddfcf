#include "backends/cpu/cpu_compiler.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
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
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

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

std::string CpuCompiler::NativeMarch(const std::string& log) const {
  absl::StatusOr<CompilerRun> run = Run({path_, "-march=native", "-Q", "--help=target"}, log, 5);
  if (!run.ok() || !run->ok) return "";
  return ParseNativeMarch(run->diagnostics);
}

std::string ParseNativeMarch(const std::string& help) {
  // The line "  -march=<spaces and tabs><name>".
  const size_t at = help.find("  -march=");
  if (at == std::string::npos) return "";
  size_t b = at + 9;
  while (b < help.size() && (help[b] == ' ' || help[b] == '\t')) ++b;
  size_t e = b;
  while (e < help.size() && (absl::ascii_isalnum(static_cast<unsigned char>(help[e])) ||
                             help[e] == '-' || help[e] == '_' || help[e] == '.')) {
    ++e;
  }
  const std::string name = help.substr(b, e - b);
  return name == "native" ? "" : name;
}

namespace {

// In the supervisor (below): the whole process group, itself included.
void KillOwnGroup(int) { kill(0, SIGKILL); }

// Runs in the forked child, so only async-signal-safe calls. The child leads
// a new process group and supervises the compiler, which it forks and
// waits for: a timeout kills the group; so does the worker's death (a
// SIGKILL, or an exit without waiting, as a drain that gives up does),
// through the parent-death signal, which reaches only a direct child; the
// supervisor passes it to the compiler's driver and whatever it started.
[[noreturn]] void SuperviseCompiler(char* const* argv, const char* log, pid_t parent) {
  setpgid(0, 0);
  struct sigaction kill_group {};
  kill_group.sa_handler = KillOwnGroup;
  sigaction(SIGTERM, &kill_group, nullptr);
  sigset_t empty;
  sigemptyset(&empty);
  sigprocmask(SIG_SETMASK, &empty, nullptr);
  prctl(PR_SET_PDEATHSIG, SIGTERM);
  if (getppid() != parent) kill(0, SIGKILL);  // the worker died before prctl
  const int in = open("/dev/null", O_RDONLY);
  const int out = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  if (in < 0 || out < 0) _exit(126);
  dup2(in, STDIN_FILENO);
  dup2(out, STDOUT_FILENO);
  dup2(out, STDERR_FILENO);
  const pid_t compiler = fork();
  if (compiler < 0) _exit(126);
  if (compiler == 0) {
    // Default dispositions whatever the worker set (it ignores SIGPIPE).
    for (int sig : {SIGTERM, SIGPIPE, SIGINT}) signal(sig, SIG_DFL);
    execvp(argv[0], argv);
    _exit(127);  // the shell's status for a command not found
  }
  int status = 0;
  while (waitpid(compiler, &status, 0) < 0) {
    if (errno != EINTR) _exit(126);
  }
  if (WIFSIGNALED(status)) {
    signal(WTERMSIG(status), SIG_DFL);
    kill(getpid(), WTERMSIG(status));
  }
  _exit(WIFEXITED(status) ? WEXITSTATUS(status) : 126);
}

}  // namespace

absl::StatusOr<CompilerRun> CpuCompiler::Run(const std::vector<std::string>& args,
                                             const std::string& log, double timeout_seconds) const {
  if (timeout_seconds <= 0) timeout_seconds = kDefaultTimeoutSeconds;
  std::vector<char*> argv;
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);

  const auto start = std::chrono::steady_clock::now();
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("cannot start compiler '", path_, "': fork: ", std::strerror(errno)));
  }
  if (pid == 0) SuperviseCompiler(argv.data(), log.c_str(), parent);
  // Also here, so that a kill(-pid) right after fork finds the group.
  setpgid(pid, pid);

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
  // The supervisor reports a compiler it could not execute as status 127.
  if (!result.ok && !result.timed_out && result.exit_status == 127 && result.diagnostics.empty()) {
    return absl::FailedPreconditionError(absl::StrCat("cannot run compiler '", path_, "'"));
  }
  return result;
}

}  // namespace yirage::backends::cpu
