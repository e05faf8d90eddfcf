// Turns a job's best candidate into files a user can build and call without
// YiRage: the generated source, a JSON manifest (entry point, argument order,
// shapes, dtypes, build command) and a build script.
#ifndef YIRAGE_SERVER_KERNEL_EXPORT_H_
#define YIRAGE_SERVER_KERNEL_EXPORT_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/job_store.h"
#include "yirage/v1/job.pb.h"

namespace yirage::server {

absl::StatusOr<yirage::v1::GetKernelResponse> ExportKernel(const std::string& job_id,
                                                           const JobStore::BestKernel& best);

}  // namespace yirage::server

#endif  // YIRAGE_SERVER_KERNEL_EXPORT_H_
