// Starts the real yirage binaries as child processes for integration tests:
// the server on free loopback ports (port 0, read back from its first line),
// and the client with captured output.
#ifndef YIRAGE_TESTS_INTEGRATION_PROCESS_HARNESS_H_
#define YIRAGE_TESTS_INTEGRATION_PROCESS_HARNESS_H_

#include <sys/types.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace yirage::testing {

std::string BinDir();     // where the built binaries are
std::string SourceDir();  // the repository root
std::string MakeTempDir(const std::string& tag);
std::string ReadFile(const std::string& path);  // whole file; "" if unreadable

struct CommandResult {
  int exit_code = -1;
  std::string out;
  std::string err;
  nlohmann::json Json() const;  // parses `out`; null on failure
};

// Starts a program in its own process group with stdout and stderr to the
// files given (the same path: one file) and stdin from /dev/null.
pid_t SpawnProcess(const std::vector<std::string>& argv, const std::string& out_path,
                   const std::string& err_path);

// Runs a program to completion (killed after `timeout`).
CommandResult RunCommand(const std::vector<std::string>& argv,
                         std::chrono::seconds timeout = std::chrono::seconds(120));

class ServerProcess {
 public:
  ServerProcess() = default;
  ServerProcess(const ServerProcess&) = delete;
  ~ServerProcess();

  // Starts yirage-server with its own database `db_path` on port-0 listeners
  // plus `extra_args`. Returns false (and a reason in *error) if it did not
  // print its listening line within 30 s.
  bool Start(const std::string& db_path, const std::vector<std::string>& extra_args,
             std::string* error);
  // SIGTERM and wait; returns the exit status as from waitpid.
  int Stop();
  // SIGKILL and reap.
  void Kill();

  pid_t pid() const { return pid_; }
  const std::string& client_address() const { return client_; }
  const std::string& worker_address() const { return worker_; }
  const std::string& metrics_address() const { return metrics_; }
  std::string Log() const;  // stdout + stderr so far

  // yirage-client --server <client address> args...
  CommandResult Client(const std::vector<std::string>& args,
                       std::chrono::seconds timeout = std::chrono::seconds(120)) const;
  // `get --json JOB`, polled until the job ends or `timeout` passes.
  nlohmann::json WaitForJob(const std::string& job_id, std::chrono::seconds timeout) const;
  // `get --json JOB` (after `client_args`, e.g. a token file), polled until
  // the job has left SEARCHING (its candidates are stored, or it ended) or
  // `timeout` passes.
  nlohmann::json WaitForSearch(const std::string& job_id,
                               std::chrono::seconds timeout = std::chrono::seconds(60),
                               const std::vector<std::string>& client_args = {}) const;

 private:
  // `get_args` (a `get --json`) polled every `interval` until the job's state
  // satisfies `done` or `timeout` passes; the last answer.
  nlohmann::json PollJob(const std::vector<std::string>& get_args,
                         const std::function<bool(const std::string&)>& done,
                         std::chrono::seconds timeout, std::chrono::milliseconds interval) const;

  pid_t pid_ = -1;
  std::string log_path_;
  std::string client_, worker_, metrics_;
};

// HTTP GET of http://<address><path> (loopback only); empty on failure.
std::string HttpGet(const std::string& address, const std::string& path);

}  // namespace yirage::testing

#endif  // YIRAGE_TESTS_INTEGRATION_PROCESS_HARNESS_H_
