#include "server/local_workers.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/rpc_util.h"
#include "spdlog/spdlog.h"

namespace yirage::server {

absl::StatusOr<std::vector<LocalWorkers::Spec>> LocalWorkers::SpecsForMode(
    const std::string& mode, const std::string& backend_dir) {
  if (mode == "none") return std::vector<Spec>{};
  if (mode == "cpu") return std::vector<Spec>{{"cpu", {}}};
  if (mode == "auto") {
    std::vector<Spec> specs = {{"cpu", {}}};
    for (const char* gpu : {"cuda", "hip", "level_zero"}) {
      std::string lib = absl::StrCat(backend_dir, "/libyirage_backend_", gpu, ".so");
      if (access(lib.c_str(), R_OK) == 0) specs.push_back({gpu, {}, /*per_device=*/true});
    }
    return specs;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("--local-workers: expected auto, cpu or none, got '", mode, "'"));
}

namespace {

// "cuda worker (pid 12)", "cuda worker (pid 12, device 1)".
std::string Label(const LocalWorkers::Spec& spec, pid_t pid) {
  return spec.device < 0
             ? absl::StrCat(spec.backend, " worker (pid ", pid, ")")
             : absl::StrCat(spec.backend, " worker (pid ", pid, ", device ", spec.device, ")");
}

// Forks and execs `args` with the server's environment, output to
// /dev/null. Everything is built before fork (the child of a threaded
// process only execs). -1 when fork fails.
pid_t SpawnQuiet(const std::vector<std::string>& args) {
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
  pid_t pid = fork();
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (null_fd >= 0) {
      dup2(null_fd, STDIN_FILENO);
      dup2(null_fd, STDOUT_FILENO);
      dup2(null_fd, STDERR_FILENO);
    }
    execv(argv[0], argv.data());
    _exit(127);
  }
  if (null_fd >= 0) close(null_fd);
  return pid;
}

}  // namespace

int LocalWorkers::CountDevices(const std::string& worker_binary, const std::string& backend,
                               double timeout_seconds) {
  int found = 0;
  while (found < kMaxDevices) {
    // Device 0 alone first (most machines have no device of most backends),
    // then eight probes at once.
    const int round = found == 0 ? 1 : 8;
    std::vector<pid_t> pids;
    for (int i = found; i < found + round && i < kMaxDevices; ++i) {
      pids.push_back(SpawnQuiet(
          {worker_binary, "--backend", backend, "--probe", "--device", std::to_string(i)}));
    }
    // ok[i]: probe found + i exited 0.
    std::vector<bool> ok(pids.size(), false);
    std::vector<bool> done(pids.size(), false);
    const auto deadline = std::chrono::steady_clock::now() +
                          std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
    for (size_t left = pids.size(); left > 0;) {
      for (size_t i = 0; i < pids.size(); ++i) {
        if (done[i]) continue;
        int status = 0;
        const pid_t r = pids[i] < 0 ? -1 : waitpid(pids[i], &status, WNOHANG);
        if (r != 0) {
          ok[i] = r == pids[i] && WIFEXITED(status) && WEXITSTATUS(status) == 0;
          done[i] = true;
          --left;
        }
      }
      if (left == 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        for (size_t i = 0; i < pids.size(); ++i) {
          if (done[i]) continue;
          spdlog::warn("{} device probe (pid {}) ran past {} s; killed", backend, pids[i],
                       timeout_seconds);
          kill(pids[i], SIGKILL);
          waitpid(pids[i], nullptr, 0);
          done[i] = true;
        }
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    size_t n = 0;
    while (n < ok.size() && ok[n]) ++n;
    found += static_cast<int>(n);
    if (n < ok.size()) break;
  }
  return found;
}

std::vector<LocalWorkers::Spec> LocalWorkers::ExpandDevices(const std::string& worker_binary,
                                                            const std::vector<Spec>& specs) {
  std::vector<Spec> out;
  for (const Spec& spec : specs) {
    if (!spec.per_device) {
      out.push_back(spec);
      continue;
    }
    const int count = CountDevices(worker_binary, spec.backend);
    spdlog::info("local workers: {} {} device{} found", count, spec.backend, count == 1 ? "" : "s");
    for (int device = 0; device < std::max(count, 1); ++device) {
      Spec one = spec;
      one.per_device = false;
      one.device = device;
      one.extra_args.insert(one.extra_args.end(), {"--device", std::to_string(device)});
      out.push_back(std::move(one));
    }
  }
  return out;
}

LocalWorkers::LocalWorkers(std::string worker_binary, std::string scheduler_address,
                           std::vector<std::string> connect_args, std::string token)
    : worker_binary_(std::move(worker_binary)),
      scheduler_address_(std::move(scheduler_address)),
      connect_args_(std::move(connect_args)),
      token_(std::move(token)) {}

LocalWorkers::~LocalWorkers() { Stop(); }

pid_t LocalWorkers::Spawn(const Spec& spec) {
  std::vector<std::string> args = {worker_binary_, "--scheduler", scheduler_address_, "--backend",
                                   spec.backend};
  args.insert(args.end(), connect_args_.begin(), connect_args_.end());
  args.insert(args.end(), spec.extra_args.begin(), spec.extra_args.end());
  // argv and the environment are built before fork: the child of a
  // threaded process only execs.
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    if (!token_.empty() && std::string_view(*e).rfind("YIRAGE_TOKEN=", 0) == 0) continue;
    env_strings.emplace_back(*e);
  }
  if (!token_.empty()) env_strings.push_back("YIRAGE_TOKEN=" + token_);
  std::vector<char*> envp;
  for (auto& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  const pid_t server_pid = getpid();
  pid_t pid = fork();
  if (pid == 0) {
    // Child: die with the server rather than linger as an orphan (its batch
    // lease then expires and the work goes to the next worker). The server
    // blocks SIGTERM and SIGINT in its threads (a signal thread waits for
    // them) and exec keeps the mask: unblocked here, or the worker would
    // never see the SIGTERM below nor any later one.
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, nullptr);
    prctl(PR_SET_PDEATHSIG, SIGTERM);
    if (getppid() != server_pid) _exit(0);  // the server died before prctl
    execve(worker_binary_.c_str(), argv.data(), envp.data());
    _exit(127);
  }
  if (pid < 0) {
    spdlog::error("cannot fork a {} worker: {}", spec.backend, strerror(errno));
  } else {
    spdlog::info("started local {}", Label(spec, pid));
  }
  return pid;
}

absl::Status LocalWorkers::Start(const std::vector<Spec>& requested) {
  if (requested.empty()) return absl::OkStatus();
  if (access(worker_binary_.c_str(), X_OK) != 0) {
    return absl::NotFoundError(
        absl::StrCat("worker binary '", worker_binary_, "' is missing or not executable"));
  }
  const std::vector<Spec> specs = ExpandDevices(worker_binary_, requested);
  {
    absl::MutexLock lock(&mu_);
    for (const Spec& spec : specs) {
      Child child;
      child.spec = spec;
      child.pid = Spawn(spec);
      children_.push_back(child);
    }
  }
  supervisor_ = std::thread([this] { SuperviseLoop(); });
  return absl::OkStatus();
}

void LocalWorkers::SuperviseLoop() {
  while (!stop_) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    absl::MutexLock lock(&mu_);
    if (stop_) break;
    double now = UnixNow();
    for (Child& child : children_) {
      if (child.pid > 0) {
        int status = 0;
        pid_t r = waitpid(child.pid, &status, WNOHANG);
        if (r == child.pid) {
          std::string how = WIFSIGNALED(status)
                                ? absl::StrCat("killed by signal ", WTERMSIG(status))
                                : absl::StrCat("exited with code ", WEXITSTATUS(status));
          // Exit code 3 is a worker's "no device for this backend": final.
          if (WIFEXITED(status) && WEXITSTATUS(status) == 3) {
            spdlog::warn("local {} {}: no device; not restarting it", Label(child.spec, child.pid),
                         how);
            child.pid = -2;
            continue;
          }
          // Exit code 4: the device was lost for that process (a kernel
          // fault); a fresh process is what it needs, right away.
          bool device_lost = WIFEXITED(status) && WEXITSTATUS(status) == 4;
          if (!device_lost) child.restarts++;
          double backoff =
              device_lost ? 0.1 : std::min(10.0, 0.2 * (1 << std::min(child.restarts, 6)));
          spdlog::warn("local {} {}; restarting in {:.1f} s", Label(child.spec, child.pid), how,
                       backoff);
          child.pid = -1;
          child.next_start = now + backoff;
        }
      } else if (child.pid == -1 && now >= child.next_start) {
        child.pid = Spawn(child.spec);
        if (child.pid < 0) child.next_start = now + 5;
      }
    }
  }
}

void LocalWorkers::Stop() {
  if (stop_.exchange(true)) return;
  if (supervisor_.joinable()) supervisor_.join();
  absl::MutexLock lock(&mu_);
  for (Child& child : children_) {
    if (child.pid > 0) kill(child.pid, SIGTERM);
  }
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  for (Child& child : children_) {
    if (child.pid <= 0) continue;
    for (;;) {
      int status = 0;
      pid_t r = waitpid(child.pid, &status, WNOHANG);
      if (r == child.pid || r < 0) break;
      if (std::chrono::steady_clock::now() > deadline) {
        kill(child.pid, SIGKILL);
        waitpid(child.pid, &status, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    child.pid = -2;
  }
}

std::vector<pid_t> LocalWorkers::Pids() {
  absl::MutexLock lock(&mu_);
  std::vector<pid_t> pids;
  for (const Child& child : children_) {
    if (child.pid > 0) pids.push_back(child.pid);
  }
  return pids;
}

}  // namespace yirage::server
