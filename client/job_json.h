// JSON views of jobs, candidates and workers for `yirage-client --json`.
#ifndef YIRAGE_CLIENT_JOB_JSON_H_
#define YIRAGE_CLIENT_JOB_JSON_H_

#include "nlohmann/json.hpp"
#include "yirage/v1/job.pb.h"

namespace yirage::client {

// Keys: job_id, graph, state (QUEUED ...), backend, candidates_generated,
// candidates_evaluated, candidates_failed, candidates_pending, best {...} or
// null, tolerance, created/started/finished (unix seconds), message.
nlohmann::json JobToJson(const yirage::v1::Job& job);
nlohmann::json CandidateToJson(const yirage::v1::Candidate& candidate);
nlohmann::json WorkerToJson(const yirage::v1::WorkerInfo& worker);

}  // namespace yirage::client

#endif  // YIRAGE_CLIENT_JOB_JSON_H_
