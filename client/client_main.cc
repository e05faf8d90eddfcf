// yirage-client: the command-line client of the YiRage scheduler.
#include <cstdlib>
#include <iostream>

#include "CLI/CLI.hpp"
#include "client/chip_commands.h"
#include "client/client_commands.h"
#include "client/roofline_command.h"
#include "common/channel_flags.h"
#include "yirage/build_info.h"

int main(int argc, char** argv) {
  CLI::App app{"yirage-client: submit graphs to a YiRage server and read the results"};
  app.require_subcommand(1);
  app.set_version_flag(
      "--version", std::string("yirage-client ") + YIRAGE_VERSION + " (" + YIRAGE_GIT_SHA + ")");
  // YIRAGE_SERVER: the address where --server is not given.
  const char* server_env = std::getenv("YIRAGE_SERVER");
  std::string server =
      server_env != nullptr && *server_env != '\0' ? server_env : "127.0.0.1:50051";
  double timeout_seconds = 10;
  bool json = false;
  app.add_option("--server", server,
                 "server client API address (default: $YIRAGE_SERVER, else 127.0.0.1:50051)")
      ->capture_default_str();
  app.add_option("--timeout", timeout_seconds, "deadline of each call, seconds")
      ->capture_default_str();
  app.add_flag("--json", json, "print one JSON object");
  yirage::ChannelOptions channel_options;
  yirage::AddChannelFlags(app, "server", &channel_options);

  // The options of a submission, for `submit` and `submit-spec`.
  auto add_submit_options = [&json](CLI::App* cmd, yirage::client::SubmitOptions* submit) {
    cmd->add_option("--backend", submit->backend,
                    "cpu, cuda, ... (default: the --chip's backend, else cpu)");
    cmd->add_option("--budget-candidates", submit->budget_candidates,
                    "evaluate at most N candidates (0 = server default)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--budget-seconds", submit->budget_seconds,
                    "stop evaluating after S seconds (0 = no limit)")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--rtol", submit->rtol, "relative tolerance override")
        ->check(CLI::NonNegativeNumber);
    cmd->add_option("--atol", submit->atol, "absolute tolerance override")
        ->check(CLI::NonNegativeNumber);
    auto* chip_opt = cmd->add_option(
        "--chip", submit->chip_id,
        "target chip id (or a seed alias): the job runs only on workers of that chip");
    cmd->add_flag("--any-chip", submit->any_chip,
                  "with --chip: any worker of the backend may run the job (the chip steers "
                  "the search only)")
        ->needs(chip_opt);
    cmd->add_flag("--no-cache", submit->no_cache,
                  "search even when a finished job with the same graph, backend, chip and "
                  "tolerance could answer");
    cmd->add_flag("--json", json, "print one JSON object");
  };
  yirage::client::SubmitOptions submit;
  auto* submit_cmd = app.add_subcommand("submit", "submit a graph (JSON file) for optimization");
  submit_cmd->add_option("graph", submit.graph_path, "graph JSON file")->required();
  add_submit_options(submit_cmd, &submit);
  submit_cmd->add_option("--request-id", submit.request_id,
                         "this submission's id: a submit repeating it returns the first job "
                         "(default: a random one, kept across the command's own retries)");
  submit_cmd->add_flag("--wait", submit.wait, "wait for the job to end and print it");

  yirage::client::SpecSubmitOptions spec;
  auto* spec_cmd = app.add_subcommand(
      "submit-spec",
      "submit one job per variant of a spec file (YAML: dims, graph, variants, FLOP and byte "
      "formulas; docs/spec-files.md)");
  spec_cmd->add_option("spec", spec.spec_path, "spec file (YAML)")->required();
  spec_cmd->add_option("--variant", spec.variants, "only this variant (repeatable; default: all)");
  spec_cmd->add_flag("--print-graphs", spec.print_graphs,
                     "print each selected variant's graph JSON and submit nothing");
  add_submit_options(spec_cmd, &spec.submit);
  spec_cmd->add_flag("--wait", spec.submit.wait,
                     "wait for every job to end and print a summary table");

  std::string job_id, out_dir;
  int limit = 50;
  auto* watch_cmd = app.add_subcommand("watch", "show a job's progress until it ends");
  watch_cmd->add_option("job", job_id)->required();
  watch_cmd->add_flag("--json", json, "print the final job as one JSON object");
  auto* get_cmd = app.add_subcommand("get", "show a job");
  get_cmd->add_option("job", job_id)->required();
  get_cmd->add_flag("--json", json, "print one JSON object");
  auto* list_cmd = app.add_subcommand("list", "list jobs, newest first");
  list_cmd->add_option("--limit", limit, "at most N jobs")->capture_default_str();
  list_cmd->add_flag("--json", json, "print one JSON object");
  auto* cancel_cmd = app.add_subcommand("cancel", "cancel a job");
  cancel_cmd->add_option("job", job_id)->required();
  cancel_cmd->add_flag("--json", json, "print one JSON object");
  auto* candidates_cmd = app.add_subcommand("candidates", "every candidate of a job");
  candidates_cmd->add_option("job", job_id)->required();
  candidates_cmd->add_flag("--json", json, "print one JSON object");
  auto* tree_cmd = app.add_subcommand(
      "tree", "a job's trial tree: its graphs by rewrite, their partitions, each candidate");
  tree_cmd->add_option("job", job_id)->required();
  tree_cmd->add_flag("--json", json, "print one JSON object");
  auto* kernel_cmd = app.add_subcommand("kernel", "write the best kernel of a job to a folder");
  kernel_cmd->add_option("job", job_id)->required();
  kernel_cmd->add_option("--out", out_dir, "output folder")->required();
  kernel_cmd->add_flag("--json", json, "print one JSON object");
  std::string march;
  int64_t candidate_id = 0;
  kernel_cmd->add_option("--march", march,
                         "CPU: the compiler target of build.sh (e.g. x86-64-v3 for a portable "
                         "build, znver4, neoverse-v2); default: the CPU of the worker that timed "
                         "it");
  kernel_cmd
      ->add_option("--candidate", candidate_id,
                   "export this candidate (any verified one; see `candidates JOB`), not the best")
      ->check(CLI::PositiveNumber);
  yirage::client::RooflineOptions roofline;
  auto* roofline_cmd = app.add_subcommand(
      "roofline",
      "draw a job's candidates on its chip's roofline, as an image (Python with matplotlib)");
  roofline_cmd->add_option("job", roofline.job_id)->required();
  roofline_cmd
      ->add_option("--out", roofline.out, "the image to write (PNG; .svg or .pdf by extension)")
      ->required();
  roofline_cmd->add_option("--chip", roofline.chip_id,
                           "draw this registry chip's roofs (default: the job's chip)");
  roofline_cmd
      ->add_option("--peak-tflops", roofline.peak_tflops,
                   "compute roof, TFLOP/s (default: the chip's peak for the graph's dtype)")
      ->check(CLI::PositiveNumber);
  roofline_cmd
      ->add_option("--bandwidth-gbps", roofline.bandwidth_gbps,
                   "memory roof, GB/s (default: the chip's memory bandwidth)")
      ->check(CLI::PositiveNumber);
  roofline_cmd->add_option("--dpi", roofline.dpi, "the image's resolution")
      ->check(CLI::Range(30, 1200))
      ->capture_default_str();
  roofline_cmd->add_flag("--json", json, "print the points and roofs as one JSON object");
  auto* workers_cmd = app.add_subcommand("workers", "workers and their devices");
  workers_cmd->add_flag("--json", json, "print one JSON object");

  auto* chips_cmd = app.add_subcommand("chips", "the chip registry");
  chips_cmd->require_subcommand(1);
  yirage::client::ChipListOptions chip_filter;
  std::string chip_id, chip_file;
  bool overwrite = false;
  int watch_count = 0;
  double watch_seconds = 0;
  auto* chips_list_cmd = chips_cmd->add_subcommand("list", "list chips");
  chips_list_cmd->add_option("--vendor", chip_filter.vendor, "only this vendor");
  chips_list_cmd->add_option("--backend", chip_filter.backend, "only this backend");
  chips_list_cmd->add_option("--category", chip_filter.category, "only this category");
  chips_list_cmd->add_flag("--json", json, "print one JSON object");
  auto* chips_get_cmd = chips_cmd->add_subcommand("get", "show one chip (JSON)");
  chips_get_cmd->add_option("chip", chip_id)->required();
  chips_get_cmd->add_flag("--json", json, "include server timestamps");
  auto* chips_register_cmd =
      chips_cmd->add_subcommand("register", "register a chip from a JSON file (one chip object)");
  chips_register_cmd->add_option("file", chip_file)->required();
  chips_register_cmd->add_flag("--overwrite", overwrite, "replace a chip of the same id");
  chips_register_cmd->add_flag("--json", json, "print one JSON object");
  auto* chips_delete_cmd = chips_cmd->add_subcommand("delete", "delete a chip");
  chips_delete_cmd->add_option("chip", chip_id)->required();
  chips_delete_cmd->add_flag("--json", json, "print one JSON object");
  auto* chips_import_cmd =
      chips_cmd->add_subcommand("import", "import a JSON list of chips (all or nothing)");
  chips_import_cmd->add_option("file", chip_file)->required();
  chips_import_cmd->add_flag("--overwrite", overwrite, "replace chips that exist and differ");
  chips_import_cmd->add_flag("--json", json, "print one JSON object");
  auto* chips_export_cmd = chips_cmd->add_subcommand("export", "write chips to a JSON file");
  chips_export_cmd->add_option("file", chip_file)->required();
  chips_export_cmd->add_option("--vendor", chip_filter.vendor, "only this vendor");
  chips_export_cmd->add_option("--backend", chip_filter.backend, "only this backend");
  chips_export_cmd->add_option("--category", chip_filter.category, "only this category");
  chips_export_cmd->add_flag("--json", json, "print one JSON object");
  auto* chips_watch_cmd =
      chips_cmd->add_subcommand("watch", "print chip registrations, changes and deletions");
  chips_watch_cmd->add_option("--count", watch_count, "stop after N events (0 = never)")
      ->check(CLI::NonNegativeNumber);
  chips_watch_cmd->add_option("--for", watch_seconds, "stop after S seconds (0 = never)")
      ->check(CLI::NonNegativeNumber);
  chips_watch_cmd->add_flag("--json", json, "one JSON object per line");
  auto* chips_search_cmd =
      chips_cmd->add_subcommand("search-config", "the search space a chip's jobs get");
  chips_search_cmd->add_option("chip", chip_id)->required();
  chips_search_cmd->add_flag("--json", json, "print one JSON object");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every usage error 2.
    const int code = app.exit(e);
    return code == 0 ? 0 : 2;
  }
  absl::StatusOr<std::shared_ptr<grpc::Channel>> channel =
      yirage::MakeChannel(server, channel_options);
  if (!channel.ok()) {
    std::cerr << "yirage-client: " << channel.status().message() << "\n";
    return 2;
  }
  yirage::client::ClientCommands commands(
      server, *channel, std::chrono::milliseconds(static_cast<int>(timeout_seconds * 1000)), json,
      std::cout, std::cerr);
  if (*chips_cmd) {
    yirage::client::ChipCommands chips(
        server, *channel, std::chrono::milliseconds(static_cast<int>(timeout_seconds * 1000)), json,
        std::cout, std::cerr);
    if (*chips_list_cmd) return chips.List(chip_filter);
    if (*chips_get_cmd) return chips.Get(chip_id);
    if (*chips_register_cmd) return chips.Register(chip_file, overwrite);
    if (*chips_delete_cmd) return chips.Delete(chip_id);
    if (*chips_import_cmd) return chips.Import(chip_file, overwrite);
    if (*chips_export_cmd) return chips.Export(chip_file, chip_filter);
    if (*chips_watch_cmd) return chips.Watch(watch_count, watch_seconds);
    if (*chips_search_cmd) return chips.SearchConfig(chip_id);
    return 2;
  }
  if (*submit_cmd) return commands.Submit(submit);
  if (*spec_cmd) return commands.SubmitSpec(spec);
  if (*watch_cmd) return commands.Watch(job_id);
  if (*get_cmd) return commands.Get(job_id);
  if (*list_cmd) return commands.List(limit);
  if (*cancel_cmd) return commands.Cancel(job_id);
  if (*candidates_cmd) return commands.Candidates(job_id);
  if (*tree_cmd) return commands.Tree(job_id);
  if (*kernel_cmd) return commands.Kernel(job_id, out_dir, march, candidate_id);
  if (*workers_cmd) return commands.Workers();
  if (*roofline_cmd) {
    yirage::client::RooflineCommand command(
        server, *channel, std::chrono::milliseconds(static_cast<int>(timeout_seconds * 1000)), json,
        std::cout, std::cerr);
    return command.Run(roofline);
  }
  return 2;
}
