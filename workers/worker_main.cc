// yirage-worker: one process per device. Loads its backend at run time,
// registers the device it finds, and evaluates candidate batches.
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "CLI/CLI.hpp"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/channel_flags.h"
#include "common/log_format.h"
#include "nlohmann/json.hpp"
#include "spdlog/spdlog.h"
#include "workers/device_select.h"
#include "workers/worker.h"

namespace {
std::atomic<bool> g_stop{false};
void OnSignal(int) { g_stop = true; }
}  // namespace

int main(int argc, char** argv) {
  yirage::worker::WorkerOptions options;
  CLI::App app{"yirage-worker: evaluates YiRage candidates on one device"};
  app.add_option("--scheduler", options.scheduler, "scheduler worker API address")
      ->capture_default_str();
  app.add_option("--backend", options.backend, "backend: cpu, cuda, hip, level_zero")
      ->capture_default_str();
  app.add_option("--device", options.device,
                 "device of the backend to use (the N-th this process can see; cuda, hip and "
                 "level_zero narrow CUDA_VISIBLE_DEVICES, HIP_VISIBLE_DEVICES or ZE_AFFINITY_MASK "
                 "to it before the backend loads; cpu has only device 0)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  app.add_option("--backend-dir", options.backend_dir,
                 "directory holding libyirage_backend_<name>.so (default: beside this binary)");
  std::string backend_library;
  app.add_option("--backend-library", backend_library,
                 "load the backend from this .so instead of libyirage_backend_<name>.so");
  app.add_option("--worker-id", options.worker_id,
                 "stable id (default: host-backend-pid-random; GPU backends add the device to "
                 "the backend, e.g. host-cuda1-pid-random)");
  app.add_option("--rpc-timeout", options.rpc_timeout_seconds, "deadline of each call, seconds")
      ->capture_default_str();
  app.add_option("--timing-target-seconds", options.timing.target_seconds,
                 "time spent timing one candidate")
      ->capture_default_str();
  app.add_option("--timing-max-runs", options.timing.max_runs, "timed runs per candidate at most")
      ->capture_default_str();
  bool probe_only = false;
  app.add_flag("--probe", probe_only, "print the device description and exit");
  std::string log_level = "info";
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error")
      ->capture_default_str();
  std::string log_format = "text";
  app.add_option("--log-format", log_format,
                 "text, or json: one JSON object a line (time, level, logger, msg)")
      ->check(CLI::IsMember({"text", "json"}))
      ->capture_default_str();
  yirage::ChannelOptions channel_options;
  yirage::AddChannelFlags(app, "scheduler", &channel_options);
  app.add_option("--drain-seconds", options.drain_seconds,
                 "on SIGTERM, how long the running compile or candidate may finish and report")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  {
    auto channel = yirage::MakeChannel(options.scheduler, channel_options);
    if (!channel.ok()) {
      std::fprintf(stderr, "yirage-worker: %s\n", std::string(channel.status().message()).c_str());
      return 2;
    }
    options.channel = *channel;
  }
  spdlog::set_level(spdlog::level::from_str(log_level));
  // Logs often go to a file or pipe: flush every line so nothing is lost to
  // a crash and a reader sees events as they happen.
  spdlog::flush_on(spdlog::level::trace);
  if (log_format == "json") {
    if (absl::Status st = yirage::SetLogFormat(log_format, "yirage-worker"); !st.ok()) {
      std::fprintf(stderr, "yirage-worker: %s\n", std::string(st.message()).c_str());
      return 2;
    }
  } else {
    spdlog::set_pattern("[%Y-%m-%d %H:%M:%S.%e] [worker " + std::to_string(getpid()) + "] [%l] %v");
  }

  // Before the backend loads: its runtime then sees only this device, as
  // its device 0.
  auto selection = yirage::worker::SelectDevice(options.backend, options.device);
  if (!selection.ok()) {
    if (absl::IsNotFound(selection.status())) {
      std::fprintf(stderr, "yirage-worker: backend '%s' has no device: %s\n",
                   options.backend.c_str(), std::string(selection.status().message()).c_str());
      return 3;
    }
    std::fprintf(stderr, "yirage-worker: %s\n", std::string(selection.status().message()).c_str());
    return 2;
  }
  if (options.backend_dir.empty()) {
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    std::string exe = n > 0 ? std::string(self, n) : std::string("./yirage-worker");
    options.backend_dir = exe.substr(0, exe.rfind('/'));
  }
  auto backend = backend_library.empty()
                     ? yirage::worker::BackendLibrary::Load(options.backend, options.backend_dir)
                     : yirage::worker::BackendLibrary::LoadFile(options.backend, backend_library);
  if (!backend.ok()) {
    std::fprintf(stderr, "yirage-worker: %s\n", std::string(backend.status().message()).c_str());
    return 2;
  }
  bool has_device = false;
  auto device = (*backend)->Probe(&has_device);
  if (!device.ok()) {
    std::fprintf(stderr, "yirage-worker: %s\n", std::string(device.status().message()).c_str());
    return 2;
  }
  // The description says which device this is, so two workers of one
  // machine's identical GPUs can be told apart.
  if (nlohmann::json j = nlohmann::json::parse(*device, nullptr, false); j.is_object()) {
    j["device_index"] = selection->index;
    if (!selection->variable.empty()) {
      j["visible_devices"] = absl::StrCat(selection->variable, "=", selection->value);
    }
    *device = j.dump();
  }
  if (probe_only) {
    std::printf("%s\n", device->c_str());
    return has_device ? 0 : 3;
  }
  if (!has_device) {
    // Exit code 3 tells a supervising server not to restart us. The probe's
    // "reason" says why (no runtime library, no driver, no device).
    std::string reason = *device;
    nlohmann::json j = nlohmann::json::parse(*device, nullptr, false);
    if (j.is_object() && j.contains("reason") && j["reason"].is_string()) {
      reason = j["reason"].get<std::string>();
    }
    std::string which;
    if (!selection->variable.empty()) {
      which = absl::StrCat(" (device ", selection->index, ": ", selection->variable, "=",
                           selection->value, ")");
    }
    std::fprintf(stderr, "yirage-worker: backend '%s' has no device: %s%s\n",
                 options.backend.c_str(), reason.c_str(), which.c_str());
    return 3;
  }
  // What the backend runs here, for the scheduler's search.
  auto kernels = (*backend)->Describe();
  if (!kernels.ok()) {
    std::fprintf(stderr, "yirage-worker: %s\n", std::string(kernels.status().message()).c_str());
    return 2;
  }
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigaction(SIGTERM, &action, nullptr);
  sigaction(SIGINT, &action, nullptr);
  // A parent may have left them blocked (exec keeps the signal mask).
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_UNBLOCK, &stop_signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  yirage::worker::Worker worker(options, std::move(*backend), *device, *std::move(kernels));
  auto status = worker.Run(&g_stop);
  if (!worker.drained()) {
    // Its evaluation thread still runs (a compile past the drain time); the
    // batch went back to the scheduler. Leave without unwinding under it.
    std::fflush(nullptr);
    std::_Exit(status.ok() ? 0 : 1);
  }
  if (yirage::worker::IsDeviceLost(status)) {
    // The device context is gone for this process; a fresh one works again.
    std::fprintf(stderr, "yirage-worker: %s; exiting so a fresh process takes over\n",
                 std::string(status.message()).c_str());
    return 4;
  }
  if (!status.ok()) {
    std::fprintf(stderr, "yirage-worker: %s\n", std::string(status.message()).c_str());
    return 1;
  }
  return 0;
}
