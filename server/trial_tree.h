// A job's trial tree (yirage.v1.TrialTree): the rewritten graphs, the
// partitions and the schedules its candidates came from, with their results.
#ifndef YIRAGE_SERVER_TRIAL_TREE_H_
#define YIRAGE_SERVER_TRIAL_TREE_H_

#include <string>
#include <vector>

#include "yirage/v1/job.pb.h"

namespace yirage::server {

// Builds the tree of `job` from its `candidates` (JobStore::ListCandidates;
// confirmation rows are left out). Every candidate is a leaf under the
// partition of its plan's kernels, under the graph of its plan's rewrites
// (each rewrite a level: the graph after [a, b] is a child of the graph
// after [a]). Children keep the candidates' order (ids ascending). Pure.
// Its `text` is DrawTrialTree's.
yirage::v1::TrialTree BuildTrialTree(const yirage::v1::Job& job,
                                     const std::vector<yirage::v1::Candidate>& candidates);

// The tree drawn for a terminal, a line a node (TrialTree.text): the root,
// then each node under its parent with box-drawing prefixes; a candidate
// with its id, schedule, status, time and speedup where verified, and its
// error; any other node with its candidates, how many verified and their
// best speedup.
std::string DrawTrialTree(const yirage::v1::TrialTree& tree);

// A plan's partition: its kernels' op groups, "[a+b][c:generic]" (the form
// of the candidate generator's descriptions; kinds other than row kernels
// named after the colon).
std::string PartitionLabel(const yirage::v1::Plan& plan);

// A plan's schedule: its description without the rewrites and the
// partition ("rows b4 n64", "baseline (library matmuls)").
std::string ScheduleLabel(const yirage::v1::Plan& plan);

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_TRIAL_TREE_H_
