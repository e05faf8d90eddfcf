#include "client/roofline_command.h"

#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "client/call_failure.h"
#include "common/rpc_util.h"
#include "google/protobuf/util/json_util.h"

extern char** environ;

namespace yirage::client {
namespace {

// A message as JSON with the .proto field names (what yirage.roofline reads).
nlohmann::json MessageJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(message, &text, options).ok()) {
    return nlohmann::json::object();
  }
  return nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
}

bool HoldsSdk(const std::filesystem::path& dir) {
  std::error_code ec;
  return !dir.empty() && std::filesystem::is_regular_file(dir / "yirage" / "roofline.py", ec);
}

std::string ExeDir() {
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  return ec ? std::string() : exe.parent_path().string();
}

// Exit status 3 of yirage.roofline: matplotlib did not import (it says so,
// and what to install).
constexpr int kNoMatplotlib = 3;

}  // namespace

nlohmann::json RooflineData(const yirage::v1::Job& job,
                            const std::vector<yirage::v1::Candidate>& candidates,
                            const std::optional<yirage::v1::Chip>& chip, const std::string& chip_id,
                            const std::string& chip_error) {
  nlohmann::json data = {{"format", "yirage-roofline/1"},
                         {"job", MessageJson(job)},
                         {"candidates", nlohmann::json::array()},
                         {"chip", chip.has_value() ? MessageJson(*chip) : nlohmann::json()},
                         {"chip_id", chip_id}};
  for (const yirage::v1::Candidate& c : candidates) {
    yirage::v1::Candidate shown = c;
    shown.mutable_plan()->clear_graph();
    data["candidates"].push_back(MessageJson(shown));
  }
  if (!chip_error.empty()) data["chip_error"] = chip_error;
  return data;
}

std::string FindPython(const char* python_env) {
  if (python_env != nullptr && *python_env != '\0') return python_env;
  if (access("/usr/bin/python3", X_OK) == 0) return "/usr/bin/python3";
  return "python3";
}

std::string FindPythonSdk(const char* sdk_env, const std::string& exe_dir,
                          const std::string& source_dir) {
  std::vector<std::filesystem::path> dirs;
  if (sdk_env != nullptr && *sdk_env != '\0') dirs.emplace_back(sdk_env);
  if (!exe_dir.empty()) {
    dirs.push_back(std::filesystem::path(exe_dir) / ".." / "share" / "yirage" / "python");
  }
  if (!source_dir.empty()) dirs.emplace_back(source_dir);
  for (const auto& dir : dirs) {
    if (HoldsSdk(dir)) return std::filesystem::weakly_canonical(dir).string();
  }
  return "";
}

RooflineCommand::RooflineCommand(const std::string& server, std::shared_ptr<grpc::Channel> channel,
                                 std::chrono::milliseconds rpc_timeout, bool json,
                                 std::ostream& out, std::ostream& err)
    : jobs_(yirage::v1::JobService::NewStub(channel)),
      registry_(yirage::v1::RegistryService::NewStub(channel)),
      server_(server),
      rpc_timeout_(rpc_timeout),
      json_(json),
      out_(out),
      err_(err) {}

int RooflineCommand::Fail(const std::string& what, const grpc::Status& status) {
  return ReportCallFailure(err_, server_, what, status);
}

int RooflineCommand::Run(const RooflineOptions& options) {
  const std::string what = "roofline " + options.job_id;
  yirage::v1::Job job;
  {
    yirage::v1::GetJobRequest request;
    request.set_job_id(options.job_id);
    auto context = ContextWithDeadline(rpc_timeout_);
    grpc::Status status = jobs_->GetJob(context.get(), request, &job);
    if (!status.ok()) return Fail(what, status);
  }
  std::vector<yirage::v1::Candidate> candidates;
  {
    yirage::v1::ListCandidatesRequest request;
    request.set_job_id(options.job_id);
    yirage::v1::ListCandidatesResponse response;
    auto context = ContextWithDeadline(rpc_timeout_);
    grpc::Status status = jobs_->ListCandidates(context.get(), request, &response);
    if (!status.ok()) return Fail(what, status);
    candidates.assign(response.candidates().begin(), response.candidates().end());
  }
  const std::string chip_id = options.chip_id.empty() ? job.chip_id() : options.chip_id;
  std::optional<yirage::v1::Chip> chip;
  std::string chip_error;
  if (!chip_id.empty()) {
    yirage::v1::GetChipRequest request;
    request.set_chip_id(chip_id);
    yirage::v1::Chip found;
    auto context = ContextWithDeadline(rpc_timeout_);
    grpc::Status status = registry_->GetChip(context.get(), request, &found);
    if (status.ok()) {
      chip = std::move(found);
    } else if (status.error_code() == grpc::StatusCode::NOT_FOUND) {
      if (!options.chip_id.empty()) return Fail(what + ": --chip", status);
      chip_error = "chip '" + chip_id + "' is not in the registry";
    } else {
      return Fail(what + ": chip " + chip_id, status);
    }
  }

  // The data goes to a temp file the plotting module reads.
  std::string data_path =
      (std::filesystem::temp_directory_path() / "yirage-roofline-XXXXXX.json").string();
  const int fd = mkstemps(data_path.data(), 5);
  if (fd < 0) {
    err_ << "yirage-client: " << what << ": cannot create a temp file: " << std::strerror(errno)
         << "\n";
    return 1;
  }
  close(fd);
  struct RemoveOnExit {
    std::string path;
    ~RemoveOnExit() {
      std::error_code ec;
      std::filesystem::remove(path, ec);
    }
  } remove_data{data_path};
  {
    std::ofstream file(data_path);
    file << RooflineData(job, candidates, chip, chip_id, chip_error).dump();
    if (!file) {
      err_ << "yirage-client: " << what << ": cannot write " << data_path << "\n";
      return 1;
    }
  }

  const std::string python = FindPython(std::getenv("YIRAGE_PYTHON"));
  const std::string sdk =
      FindPythonSdk(std::getenv("YIRAGE_PYTHON_SDK"), ExeDir(), YIRAGE_PYTHON_SDK_SOURCE_DIR);
  std::vector<std::string> argv = {python,      "-m",      "yirage.roofline",
                                   "--data",    data_path, "--out",
                                   options.out, "--dpi",   std::to_string(options.dpi)};
  if (options.peak_tflops > 0) {
    argv.insert(argv.end(), {"--peak-tflops", std::to_string(options.peak_tflops)});
  }
  if (options.bandwidth_gbps > 0) {
    argv.insert(argv.end(), {"--bandwidth-gbps", std::to_string(options.bandwidth_gbps)});
  }
  if (json_) argv.push_back("--json");
  std::string error;
  const int code = RunPython(argv, sdk, &error);
  if (code < 0) {
    err_ << "yirage-client: " << what << ": cannot run " << python << ": " << error
         << " (the plot is drawn by Python with matplotlib: install python3 and "
            "python3-matplotlib, or set YIRAGE_PYTHON to an interpreter that has them)\n";
    return 1;
  }
  if (code == kNoMatplotlib) return 1;  // it said what to install
  if (code != 0) {
    if (sdk.empty()) {
      err_ << "yirage-client: " << what
           << ": the Python SDK (package yirage) was not found beside yirage-client nor in "
              "its source tree: set YIRAGE_PYTHON_SDK to a folder holding yirage/roofline.py "
              "(a checkout's client/python), or YIRAGE_PYTHON to an interpreter with the SDK "
              "installed\n";
    } else {
      err_ << "yirage-client: " << what << ": " << python << " -m yirage.roofline exited " << code
           << "\n";
    }
    return 1;
  }
  return 0;
}

int RooflineCommand::RunPython(const std::vector<std::string>& argv, const std::string& sdk_dir,
                               std::string* error) {
  std::vector<std::string> env_strings;
  const char* old_path = std::getenv("PYTHONPATH");
  for (char** e = environ; *e != nullptr; ++e) {
    if (std::strncmp(*e, "PYTHONPATH=", 11) != 0) env_strings.emplace_back(*e);
  }
  if (!sdk_dir.empty()) {
    std::string path = "PYTHONPATH=" + sdk_dir;
    if (old_path != nullptr && *old_path != '\0') path += std::string(":") + old_path;
    env_strings.push_back(path);
  } else if (old_path != nullptr) {
    env_strings.push_back(std::string("PYTHONPATH=") + old_path);
  }
  std::vector<char*> env, args;
  for (std::string& s : env_strings) env.push_back(s.data());
  env.push_back(nullptr);
  std::vector<std::string> argv_copy = argv;
  for (std::string& s : argv_copy) args.push_back(s.data());
  args.push_back(nullptr);

  int pipe_fds[2];
  if (pipe(pipe_fds) != 0) {
    *error = std::string("pipe: ") + std::strerror(errno);
    return -1;
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, pipe_fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[0]);
  posix_spawn_file_actions_addclose(&actions, pipe_fds[1]);
  out_.flush();
  err_.flush();
  std::cout.flush();
  std::cerr.flush();
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), env.data());
  posix_spawn_file_actions_destroy(&actions);
  close(pipe_fds[1]);
  if (rc != 0) {
    close(pipe_fds[0]);
    *error = std::strerror(rc);
    return -1;
  }
  char buffer[4096];
  for (;;) {
    const ssize_t n = read(pipe_fds[0], buffer, sizeof(buffer));
    if (n > 0) {
      out_.write(buffer, n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    break;
  }
  close(pipe_fds[0]);
  out_.flush();
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) {
      *error = std::string("waitpid: ") + std::strerror(errno);
      return -1;
    }
  }
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  return 128 + WTERMSIG(status);  // as a shell reports a signal
}

}  // namespace yirage::client
