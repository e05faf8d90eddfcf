#include "tests/integration/process_harness.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <thread>

namespace yirage::testing {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

pid_t SpawnProcess(const std::vector<std::string>& argv, const std::string& out_path,
                   const std::string& err_path) {
  pid_t pid = fork();
  if (pid == 0) {
    setpgid(0, 0);
    int out = open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int err =
        err_path == out_path ? out : open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    int in = open("/dev/null", O_RDONLY);
    dup2(in, 0);
    dup2(out, 1);
    dup2(err, 2);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    execv(args[0], args.data());
    _exit(127);
  }
  return pid;
}

std::string BinDir() { return YIRAGE_BIN_DIR; }
std::string SourceDir() { return YIRAGE_SOURCE_DIR; }

std::string MakeTempDir(const std::string& tag) {
  std::string pattern =
      (std::filesystem::temp_directory_path() / ("yirage_it_" + tag + "_XXXXXX")).string();
  char* dir = mkdtemp(pattern.data());
  return dir ? std::string(dir) : std::string();
}

nlohmann::json CommandResult::Json() const {
  return nlohmann::json::parse(out, nullptr, /*allow_exceptions=*/false);
}

CommandResult RunCommand(const std::vector<std::string>& argv, std::chrono::seconds timeout) {
  std::string dir = MakeTempDir("cmd");
  std::string out_path = dir + "/out", err_path = dir + "/err";
  pid_t pid = SpawnProcess(argv, out_path, err_path);
  CommandResult result;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  for (;;) {
    pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &status, 0);
      result.err = "timed out\n";
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_path);
  result.err += ReadFile(err_path);
  std::filesystem::remove_all(dir);
  return result;
}

ServerProcess::~ServerProcess() {
  if (pid_ > 0) Kill();
}

bool ServerProcess::Start(const std::string& db_path, const std::vector<std::string>& extra_args,
                          std::string* error) {
  log_path_ = db_path + ".server.log." + std::to_string(std::rand());
  std::vector<std::string> argv = {BinDir() + "/yirage-server",
                                   "--listen",
                                   "127.0.0.1:0",
                                   "--worker-listen",
                                   "127.0.0.1:0",
                                   "--metrics-listen",
                                   "127.0.0.1:0",
                                   "--db",
                                   db_path};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  pid_ = SpawnProcess(argv, log_path_, log_path_);
  static const std::regex kLine(R"(listening client=(\S+) worker=(\S+) metrics=(\S+))");
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (std::chrono::steady_clock::now() < deadline) {
    std::string log = ReadFile(log_path_);
    std::smatch m;
    if (std::regex_search(log, m, kLine)) {
      client_ = m[1];
      worker_ = m[2];
      metrics_ = m[3];
      return true;
    }
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      *error = "server exited early: " + log;
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  *error = "server printed no listening line: " + ReadFile(log_path_);
  return false;
}

int ServerProcess::Stop() {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (waitpid(pid_, &status, WNOHANG) != pid_) {
    if (std::chrono::steady_clock::now() > deadline) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  pid_ = -1;
  return status;
}

void ServerProcess::Kill() {
  if (pid_ <= 0) return;
  kill(pid_, SIGKILL);
  int status = 0;
  waitpid(pid_, &status, 0);
  pid_ = -1;
}

std::string ServerProcess::Log() const { return ReadFile(log_path_); }

CommandResult ServerProcess::Client(const std::vector<std::string>& args,
                                    std::chrono::seconds timeout) const {
  std::vector<std::string> argv = {BinDir() + "/yirage-client", "--server", client_};
  argv.insert(argv.end(), args.begin(), args.end());
  return RunCommand(argv, timeout);
}

nlohmann::json ServerProcess::PollJob(const std::vector<std::string>& get_args,
                                      const std::function<bool(const std::string&)>& done,
                                      std::chrono::seconds timeout,
                                      std::chrono::milliseconds interval) const {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  nlohmann::json job;
  while (std::chrono::steady_clock::now() < deadline) {
    CommandResult r = Client(get_args);
    job = r.Json();
    if (r.exit_code == 0 && job.is_object() && job["state"].is_string() &&
        done(job["state"].get<std::string>())) {
      return job;
    }
    std::this_thread::sleep_for(interval);
  }
  return job;
}

nlohmann::json ServerProcess::WaitForJob(const std::string& job_id,
                                         std::chrono::seconds timeout) const {
  return PollJob(
      {"get", job_id, "--json"},
      [](const std::string& state) {
        return state == "SUCCEEDED" || state == "FAILED" || state == "CANCELLED";
      },
      timeout, std::chrono::milliseconds(250));
}

nlohmann::json ServerProcess::WaitForSearch(const std::string& job_id, std::chrono::seconds timeout,
                                            const std::vector<std::string>& client_args) const {
  std::vector<std::string> args = client_args;
  args.insert(args.end(), {"get", job_id, "--json"});
  return PollJob(
      args, [](const std::string& state) { return state != "SEARCHING"; }, timeout,
      std::chrono::milliseconds(50));
}

std::string HttpGet(const std::string& address, const std::string& path) {
  auto colon = address.rfind(':');
  std::string host = address.substr(0, colon);
  int port = std::atoi(address.substr(colon + 1).c_str());
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  inet_pton(AF_INET, host.c_str(), &addr.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    close(fd);
    return "";
  }
  std::string request = "GET " + path + " HTTP/1.0\r\nHost: " + address + "\r\n\r\n";
  if (write(fd, request.data(), request.size()) < 0) {
    close(fd);
    return "";
  }
  std::string response;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0) response.append(buf, n);
  close(fd);
  return response;
}

}  // namespace yirage::testing
