#include "server/schema.h"

namespace yirage::server {

// Schema history. Never edit a released migration: append a new one.
std::vector<std::vector<std::string>> SchemaMigrations() {
  return {
      // Version 1: jobs, candidates, batches, workers.
      {R"sql(CREATE TABLE jobs (
           job_id TEXT PRIMARY KEY,
           graph_name TEXT NOT NULL,
           graph BLOB NOT NULL,
           backend TEXT NOT NULL,
           chip_id TEXT NOT NULL DEFAULT '',
           state INTEGER NOT NULL,
           rtol REAL NOT NULL,
           atol REAL NOT NULL,
           budget_candidates INTEGER NOT NULL,
           budget_seconds REAL NOT NULL,
           created REAL NOT NULL,
           started REAL NOT NULL DEFAULT 0,
           finished REAL NOT NULL DEFAULT 0,
           message TEXT NOT NULL DEFAULT '',
           seed INTEGER NOT NULL,
           baseline_candidate_id INTEGER NOT NULL DEFAULT 0))sql",
       R"sql(CREATE TABLE candidates (
           candidate_id INTEGER PRIMARY KEY AUTOINCREMENT,
           job_id TEXT NOT NULL REFERENCES jobs(job_id),
           ordinal INTEGER NOT NULL,
           plan BLOB NOT NULL,
           description TEXT NOT NULL,
           is_baseline INTEGER NOT NULL,
           status INTEGER NOT NULL,
           batch_id TEXT,
           attempts INTEGER NOT NULL DEFAULT 0,
           time_us REAL NOT NULL DEFAULT 0,
           baseline_time_us REAL NOT NULL DEFAULT 0,
           max_abs_error REAL NOT NULL DEFAULT 0,
           max_rel_error REAL NOT NULL DEFAULT 0,
           error TEXT NOT NULL DEFAULT '',
           worker_id TEXT NOT NULL DEFAULT '',
           source TEXT NOT NULL DEFAULT '',
           finished REAL NOT NULL DEFAULT 0))sql",
       "CREATE INDEX candidates_by_job ON candidates(job_id, status, ordinal)",
       "CREATE INDEX candidates_by_batch ON candidates(batch_id)",
       R"sql(CREATE TABLE batches (
           batch_id TEXT PRIMARY KEY,
           job_id TEXT NOT NULL REFERENCES jobs(job_id),
           worker_id TEXT NOT NULL,
           lease_expires REAL NOT NULL,
           current_candidate INTEGER NOT NULL DEFAULT 0,
           created REAL NOT NULL))sql",
       R"sql(CREATE TABLE workers (
           worker_id TEXT PRIMARY KEY,
           backend TEXT NOT NULL,
           hostname TEXT NOT NULL,
           pid INTEGER NOT NULL,
           device TEXT NOT NULL,
           state TEXT NOT NULL,
           current_batch TEXT NOT NULL DEFAULT '',
           first_seen REAL NOT NULL,
           last_seen REAL NOT NULL))sql"},
      // Version 2: the chip registry and the chip each worker's device
      // matched. (Until version 5 this migration also wrote the built-in
      // catalog; the chip store now upserts the catalog at every start-up.)
      {R"sql(CREATE TABLE chips (
           chip_id TEXT PRIMARY KEY,
           vendor TEXT NOT NULL,
           backend TEXT NOT NULL,
           category TEXT NOT NULL,
           body TEXT NOT NULL,
           created REAL NOT NULL,
           updated REAL NOT NULL))sql",
       "CREATE INDEX chips_by_backend ON chips(backend, vendor)",
       "ALTER TABLE workers ADD COLUMN chip_id TEXT NOT NULL DEFAULT ''"},
      // Version 3: what the search did, per job.
      {"ALTER TABLE jobs ADD COLUMN search BLOB NOT NULL DEFAULT x''"},
      // Version 4: results taken from a candidate that runs the same code.
      {"ALTER TABLE candidates ADD COLUMN same_kernel_as INTEGER NOT NULL DEFAULT 0"},
      // Version 5: where each chip came from ('builtin': the catalog of
      // data/chips, which start-up keeps current; 'user': registered or
      // imported, which start-up never touches), and the catalog chips an
      // operator deleted (start-up does not bring them back). Rows written by
      // version 2's seeding carry metadata.builtin = "true".
      {"ALTER TABLE chips ADD COLUMN origin TEXT NOT NULL DEFAULT 'user'",
       "UPDATE chips SET origin = 'builtin' WHERE json_extract(body, '$.metadata.builtin') = "
       "'true'",
       R"sql(CREATE TABLE deleted_builtin_chips (
           chip_id TEXT PRIMARY KEY,
           deleted REAL NOT NULL))sql"},
      // Version 6: what each worker's backend runs on its device (a
      // serialized BackendKernels, NULL until the worker sent it).
      {"ALTER TABLE workers ADD COLUMN kernels BLOB"},
      // Version 7: how a candidate's source is run (a serialized
      // LaunchManifest; NULL where the backend needs none).
      {"ALTER TABLE candidates ADD COLUMN launch BLOB"},
      // Version 8: the secret each lease was issued with (Batch.lease_token;
      // '' for leases issued before it), and when each job was last leased
      // from (leasing goes to the job that waited longest, so one job's
      // redeliveries do not starve the others).
      {"ALTER TABLE batches ADD COLUMN lease_token TEXT NOT NULL DEFAULT ''",
       "ALTER TABLE jobs ADD COLUMN last_leased REAL NOT NULL DEFAULT 0"},
      // Version 9: who submitted a job (the token's name, --auth-tokens),
      // and the identity a worker id is bound to (its token's name or
      // certificate; '' until a call carries one).
      {"ALTER TABLE jobs ADD COLUMN owner TEXT NOT NULL DEFAULT ''",
       "ALTER TABLE workers ADD COLUMN identity TEXT NOT NULL DEFAULT ''"},
      // Version 10: the runnable jobs (QUEUED = 1, RUNNING = 2) in leasing
      // order, so that leasing a batch reads the first few of them instead
      // of every job ever stored.
      {"CREATE INDEX jobs_runnable ON jobs(backend, last_leased, created, job_id) "
       "WHERE state IN (1, 2)"},
      // Version 11: a job's winner is run again by a second worker before
      // the job succeeds. A confirmation row copies the plan of candidate
      // `confirms` (0 on ordinary rows) and must not go to `exclude_worker`
      // (the worker that reported the original). The indexes find a job's
      // confirmation rows, and the pending ones of every job (PENDING = 1).
      {"ALTER TABLE candidates ADD COLUMN confirms INTEGER NOT NULL DEFAULT 0",
       "ALTER TABLE candidates ADD COLUMN exclude_worker TEXT NOT NULL DEFAULT ''",
       "CREATE INDEX candidates_confirming ON candidates(job_id, status) WHERE confirms <> 0",
       "CREATE INDEX candidates_pending_confirmations ON candidates(job_id) "
       "WHERE confirms <> 0 AND status = 1"},
      // Version 12: the client's id of a submission (SubmitJobRequest.
      // request_id), unique for its owner, so that a retried submit finds
      // its job.
      {"ALTER TABLE jobs ADD COLUMN request_id TEXT NOT NULL DEFAULT ''",
       "CREATE UNIQUE INDEX jobs_by_request ON jobs(owner, request_id) WHERE request_id <> ''"},
      // Version 13: a job leased only to workers of its chip
      // (SubmitJobRequest.any_chip).
      {"ALTER TABLE jobs ADD COLUMN chip_bound INTEGER NOT NULL DEFAULT 0"},
      // Version 14: the final round. A row with final_of times that
      // candidate's plan again beside the job's other finalists (0 on
      // ordinary rows); time_iqr_us is the spread of a row's timing rounds.
      {"ALTER TABLE candidates ADD COLUMN final_of INTEGER NOT NULL DEFAULT 0",
       "ALTER TABLE candidates ADD COLUMN time_iqr_us REAL NOT NULL DEFAULT 0"},
      // Version 15: the result cache. cache_key names a job's graph (its
      // canonical hash and names); software is the toolkit and driver of the
      // worker that timed a succeeded job's winner ('' : answers nothing);
      // cached_from the job a cached job was answered from.
      {"ALTER TABLE jobs ADD COLUMN cache_key TEXT NOT NULL DEFAULT ''",
       "ALTER TABLE jobs ADD COLUMN software TEXT NOT NULL DEFAULT ''",
       "ALTER TABLE jobs ADD COLUMN cached_from TEXT NOT NULL DEFAULT ''",
       "CREATE INDEX jobs_cache ON jobs(cache_key, backend, chip_id) WHERE state = 3"},
      // Version 16: a worker's SoftwareIdentity, computed when its row is
      // written, so that a submit counts the workers with a cached winner's
      // software in one query instead of parsing every worker's device.
      // Rows written before stay '' until their worker calls again.
      {"ALTER TABLE workers ADD COLUMN software TEXT NOT NULL DEFAULT ''"},
  };
}

}  // namespace yirage::server
