// `yirage-client roofline JOB --out roofline.png`: a job's candidates on its
// chip's roofline, as an image. The CLI fetches the job, its candidates (each
// with its work: Candidate.work, counted by the server) and the job's chip
// from the registry, writes them as JSON (format "yirage-roofline/1": the
// messages in protobuf's JSON mapping with the .proto field names) and has
// the Python SDK's plotting module draw them with matplotlib:
//
//   PYTHON -m yirage.roofline --data DATA.json --out roofline.png
//
// PYTHON: $YIRAGE_PYTHON, else /usr/bin/python3 (Debian's, where
// python3-matplotlib installs), else python3 on PATH. The package `yirage`
// is found through PYTHONPATH, which gets the first folder holding
// yirage/roofline.py of: $YIRAGE_PYTHON_SDK, <yirage-client's folder>/../share/yirage/python
// (an installed tree, as deploy/docker/collect.sh lays it out), the source
// tree's client/python (where this binary was built); else the SDK must be
// installed for PYTHON. The module needs matplotlib only (not grpcio).
#ifndef YIRAGE_CLIENT_ROOFLINE_COMMAND_H_
#define YIRAGE_CLIENT_ROOFLINE_COMMAND_H_

#include <chrono>
#include <iosfwd>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "yirage/v1/job.grpc.pb.h"
#include "yirage/v1/registry.grpc.pb.h"

namespace yirage::client {

struct RooflineOptions {
  std::string job_id;
  std::string out;            // the image (PNG; .svg or .pdf by its extension)
  std::string chip_id;        // "" = the job's chip
  double peak_tflops = 0;     // 0 = the chip's peak for the graph's dtype
  double bandwidth_gbps = 0;  // 0 = the chip's memory bandwidth
  int dpi = 150;
};

// The "yirage-roofline/1" data of a job: {"format", "job", "candidates",
// "chip" (null without one), "chip_id", "chip_error" (only when set)}. The
// candidates' rewritten graphs are left out (the plot needs their work only).
nlohmann::json RooflineData(const yirage::v1::Job& job,
                            const std::vector<yirage::v1::Candidate>& candidates,
                            const std::optional<yirage::v1::Chip>& chip, const std::string& chip_id,
                            const std::string& chip_error);

// The interpreter: `python_env` ($YIRAGE_PYTHON) when set, else
// /usr/bin/python3 where it exists, else "python3" (looked up on PATH).
std::string FindPython(const char* python_env);

// The folder holding the SDK's package (yirage/roofline.py): the first of
// `sdk_env` ($YIRAGE_PYTHON_SDK), `exe_dir`/../share/yirage/python and
// `source_dir` (the build's client/python) that holds it; "" when none does.
std::string FindPythonSdk(const char* sdk_env, const std::string& exe_dir,
                          const std::string& source_dir);

class RooflineCommand {
 public:
  RooflineCommand(const std::string& server, std::shared_ptr<grpc::Channel> channel,
                  std::chrono::milliseconds rpc_timeout, bool json, std::ostream& out,
                  std::ostream& err);

  // 0 when the image was written; 1 when a call, the interpreter or the
  // plotting failed (saying which and what to install).
  int Run(const RooflineOptions& options);

 private:
  int Fail(const std::string& what, const grpc::Status& status);
  // Runs argv with PYTHONPATH prefixed by `sdk_dir` (when set); its stdout
  // goes to out_, its stderr to this process's. The exit code, or -1 with
  // `*error` when it could not start.
  int RunPython(const std::vector<std::string>& argv, const std::string& sdk_dir,
                std::string* error);

  std::unique_ptr<yirage::v1::JobService::Stub> jobs_;
  std::unique_ptr<yirage::v1::RegistryService::Stub> registry_;
  std::string server_;
  std::chrono::milliseconds rpc_timeout_;
  bool json_;
  std::ostream& out_;
  std::ostream& err_;
};

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_ROOFLINE_COMMAND_H_
