#include "client/job_json.h"

#include "google/protobuf/util/json_util.h"

namespace yirage::client {

nlohmann::json JobToJson(const yirage::v1::Job& job) {
  nlohmann::json j = {
      {"job_id", job.job_id()},
      {"graph", job.graph_name()},
      {"state", yirage::v1::JobState_Name(job.state())},
      {"backend", job.backend()},
      {"candidates_generated", job.candidates_generated()},
      {"candidates_evaluated", job.candidates_evaluated()},
      {"candidates_failed", job.candidates_failed()},
      {"candidates_pending", job.candidates_pending()},
      {"tolerance", {{"rtol", job.tolerance().rtol()}, {"atol", job.tolerance().atol()}}},
      {"budget_candidates", job.budget_candidates()},
      {"budget_seconds", job.budget_seconds()},
      {"created_unix", job.created_unix()},
      {"started_unix", job.started_unix()},
      {"finished_unix", job.finished_unix()},
      {"message", job.message()},
  };
  const auto& search = job.search();
  j["chip_id"] = job.chip_id();
  j["chip_bound"] = job.chip_bound();
  j["cached_from"] = job.cached_from();
  if (!job.owner().empty()) j["owner"] = job.owner();
  j["search"] = {{"graphs_explored", search.graphs_explored()},
                 {"rewrites_verified", search.rewrites_verified()},
                 {"rewrites_rejected", search.rewrites_rejected()},
                 {"fingerprint_checks", search.fingerprint_checks()},
                 {"plans_generated", search.plans_generated()},
                 {"rewritten_plans", search.rewritten_plans()},
                 {"search_seconds", search.search_seconds()},
                 {"rewrite_seconds", search.rewrite_seconds()},
                 {"note", search.note()},
                 {"baseline_kind", search.baseline_kind()},
                 {"baseline_description", search.baseline_description()},
                 {"hedged_plan", search.hedged_plan()}};
  if (job.has_best()) {
    const auto& b = job.best();
    j["best"] = {{"candidate_id", b.candidate_id()},
                 {"time_us", b.time_us()},
                 {"baseline_time_us", b.baseline_time_us()},
                 {"speedup", b.speedup()},
                 {"max_abs_error", b.max_abs_error()},
                 {"max_rel_error", b.max_rel_error()},
                 {"verified", b.verified()},
                 {"worker_id", b.worker_id()},
                 {"plan", b.description()},
                 {"final_of", b.final_of()},
                 {"time_iqr_us", b.time_iqr_us()}};
    // The second worker's measurement; null while (or when left) unconfirmed.
    if (b.has_confirmation()) {
      const auto& c = b.confirmation();
      j["best"]["confirmation"] = {{"worker_id", c.worker_id()},
                                   {"time_us", c.time_us()},
                                   {"baseline_time_us", c.baseline_time_us()},
                                   {"speedup", c.speedup()}};
    } else {
      j["best"]["confirmation"] = nullptr;
    }
  } else {
    j["best"] = nullptr;
  }
  return j;
}

nlohmann::json CandidateToJson(const yirage::v1::Candidate& c) {
  std::string plan_json;
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  // A rewritten plan carries its whole graph; list its ops instead of
  // repeating every attribute (the kernels name them).
  yirage::v1::Plan shown = c.plan();
  shown.clear_graph();
  (void)google::protobuf::util::MessageToJsonString(shown, &plan_json, options);
  nlohmann::json plan = nlohmann::json::parse(plan_json, nullptr, /*allow_exceptions=*/false);
  // What the plan computes and moves (the server's count), null without.
  nlohmann::json work;
  if (c.has_work()) {
    work = {{"flops", c.work().flops()},
            {"bytes", c.work().bytes()},
            {"dtype", yirage::v1::DType_Name(c.work().dtype())}};
  }
  return {{"candidate_id", c.candidate_id()},
          {"status", yirage::v1::CandidateStatus_Name(c.status())},
          {"description", c.plan().description()},
          {"baseline", c.plan().baseline()},
          {"estimated_cost", c.plan().estimated_cost()},
          {"time_us", c.time_us()},
          {"baseline_time_us", c.baseline_time_us()},
          {"speedup", c.time_us() > 0 ? c.baseline_time_us() / c.time_us() : 0.0},
          {"max_abs_error", c.max_abs_error()},
          {"max_rel_error", c.max_rel_error()},
          {"error", c.error()},
          {"attempts", c.attempts()},
          {"worker_id", c.worker_id()},
          {"same_kernel_as", c.same_kernel_as()},
          {"confirms", c.confirms()},
          {"final_of", c.final_of()},
          {"time_iqr_us", c.time_iqr_us()},
          {"rewrites", c.plan().rewrites()},
          {"rewritten_graph_ops", c.plan().graph().ops_size()},
          {"fingerprint",
           {{"verified", c.plan().fingerprint_verified()},
            {"trials", c.plan().fingerprint_trials()},
            {"false_pass_bound", c.plan().fingerprint_false_pass_bound()},
            {"checked", !c.plan().has_graph() || c.plan().fingerprint_verified()}}},
          {"numeric_check", c.status() == yirage::v1::VERIFIED   ? "passed"
                            : c.status() == yirage::v1::MISMATCH ? "failed"
                                                                 : "not run"},
          {"work", work},
          {"plan", plan}};
}

nlohmann::json WorkerToJson(const yirage::v1::WorkerInfo& w) {
  nlohmann::json device = nlohmann::json::parse(w.device_description(), nullptr, false);
  if (device.is_discarded()) device = w.device_description();
  return {{"worker_id", w.worker_id()}, {"backend", w.backend()},
          {"hostname", w.hostname()},   {"pid", w.pid()},
          {"state", w.state()},         {"current_batch", w.current_batch()},
          {"connected", w.connected()}, {"last_seen_unix", w.last_seen_unix()},
          {"chip_id", w.chip_id()},     {"device", device}};
}

}  // namespace yirage::client
