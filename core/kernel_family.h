// The one matcher of backend kernel families (yirage.v1.KernelFamily): the
// search asks it which family a kernel's ops belong to and which of the
// family's schedule points apply, the cost model asks which family a
// kernel's schedule names, and a backend asks it before it plans a family's
// kernel, so the three never disagree. The patterns themselves are in
// core/fused_pattern.h; a backend's families and their points are data it
// reports (its `describe` call, backends/backend_api.h).
#ifndef YIRAGE_CORE_KERNEL_FAMILY_H_
#define YIRAGE_CORE_KERNEL_FAMILY_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "core/graph.h"
#include "yirage/v1/backend.pb.h"
#include "yirage/v1/plan.pb.h"

namespace yirage::core {

// True when `ops` (op ids of one kernel, ascending) is a chain of `pattern`.
bool MatchesPattern(yirage::v1::FamilyPattern pattern, const Graph& graph,
                    const std::vector<int>& ops);

// The index in kernels.families() of the first family whose pattern matches
// `ops`, or -1.
int MatchFamily(const yirage::v1::BackendKernels& kernels, const Graph& graph,
                const std::vector<int>& ops);

// True when the chain is within `limits`. REQUIRES: MatchesPattern(pattern, graph, ops).
bool WithinLimits(const yirage::v1::MatchLimits& limits, yirage::v1::FamilyPattern pattern,
                  const Graph& graph, const std::vector<int>& ops);

// The pattern whose knobs `schedule` carries (its `family` oneof), or
// FAMILY_PATTERN_UNSPECIFIED for a row or library schedule.
yirage::v1::FamilyPattern ScheduleFamily(const yirage::v1::Schedule& schedule);

// Sets `schedule`'s family knobs to `pattern`'s defaults (the backend's choice).
void SetFamilyDefault(yirage::v1::FamilyPattern pattern, yirage::v1::Schedule* schedule);

// OK when the family knobs of a KERNEL_ROW kernel's schedule fit its ops:
// none, or those of the pattern the ops match. Names the kernel and the
// field otherwise.
absl::Status CheckFamilySchedule(const Graph& graph, const std::vector<int>& ops,
                                 const std::string& kernel_name,
                                 const yirage::v1::Schedule& schedule);

// A family's pattern as the text of error messages ("streamed_matmul").
std::string PatternName(yirage::v1::FamilyPattern pattern);

}  // namespace yirage::core

#endif  // YIRAGE_CORE_KERNEL_FAMILY_H_
